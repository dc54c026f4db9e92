"""``groupstream broker``: run the embedded broker in the foreground."""

from __future__ import annotations

import argparse
from pathlib import Path

from groupstream.broker.config import BrokerConfig, ConfigError, known_properties, parse_hostport

DEFAULT_LISTEN = "127.0.0.1:9092"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("broker", help="run the embedded Kafka-protocol broker")
    p.add_argument("--data-dir", type=Path, help="directory for the log and the catalog (required to run)")
    p.add_argument("--list-properties", action="store_true",
                   help="print every broker property --set accepts, by its Kafka name, and exit")  # fmt: skip
    p.add_argument("--listen", action="append", default=None, metavar="[PROTOCOL://]HOST:PORT",
                   help="a listener, in Kafka's syntax: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL://HOST:PORT; a bare "
                        f"HOST:PORT is PLAINTEXT; port 0 picks a free one (repeatable; default {DEFAULT_LISTEN})")  # fmt: skip
    p.add_argument("--advertised", default=None,
                   help="HOST:PORT clients should connect to, for the first listener (advertised.listeners names "
                        "each listener's)")  # fmt: skip
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="broker property by its Kafka name, e.g. num.partitions=6 or ssl.keystore.location=... "
                        "(repeatable)")  # fmt: skip
    p.add_argument("--http", default=None, metavar="HOST:PORT",
                   help="serve Prometheus metrics at http://HOST:PORT/metrics (port 0 picks a free one)")  # fmt: skip
    p.set_defaults(func=run)


def build_config(args: argparse.Namespace) -> BrokerConfig:
    config = BrokerConfig(data_dir=args.data_dir)
    props: dict[str, str] = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        props[key.strip()] = value.strip()
    config.apply(props)
    if args.listen:
        if config.listener_specs is not None:
            raise ConfigError("listeners are given both with --listen and with --set listeners=...: use one of them")
        config.listener_specs = list(args.listen)
        config.listeners_from = "--listen"
    elif config.listener_specs is None:
        config.listener_specs = [DEFAULT_LISTEN]
        config.listeners_from = "--listen"
    if args.http:
        config.http = parse_hostport(args.http, "--http")
    if args.advertised:
        config.advertised_host, config.advertised_port = parse_hostport(args.advertised, "--advertised")
    first = config.resolve_listeners()[0]  # validates every listener and its security settings
    config.host, config.port = first.host, first.port
    return config


def run(args: argparse.Namespace) -> int:
    if args.list_properties:
        print("\n".join(known_properties()))
        return 0
    if args.data_dir is None:
        raise ConfigError("--data-dir is required: the directory for the log and the catalog")
    from groupstream.broker.node import Broker
    from groupstream.broker.run import run as run_broker

    config = build_config(args)

    def ready(broker: Broker) -> None:
        listening = ", ".join(str(lc) for lc in broker.listeners)
        host, port = config.advertised
        print(f"groupstream broker ready on {listening} (advertised {host}:{port})", flush=True)

    run_broker(config, ready)
    return 0
