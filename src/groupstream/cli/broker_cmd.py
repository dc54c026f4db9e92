"""``groupstream broker``: run the embedded broker in the foreground."""

from __future__ import annotations

import argparse
from pathlib import Path

from groupstream.broker.config import BrokerConfig, ConfigError, parse_hostport


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("broker", help="run the embedded Kafka-protocol broker")
    p.add_argument("--data-dir", required=True, type=Path, help="directory for the log and the catalog")
    p.add_argument("--listen", default="127.0.0.1:9092", help="HOST:PORT to listen on (port 0 picks a free one)")
    p.add_argument("--advertised", default=None, help="HOST:PORT clients should connect to")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="broker property by its Kafka name, e.g. num.partitions=6 (repeatable)")
    p.set_defaults(func=run)


def build_config(args: argparse.Namespace) -> BrokerConfig:
    host, port = parse_hostport(args.listen, "--listen")
    config = BrokerConfig(data_dir=args.data_dir, host=host, port=port)
    if args.advertised:
        config.advertised_host, config.advertised_port = parse_hostport(args.advertised, "--advertised")
    props: dict[str, str] = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        props[key.strip()] = value.strip()
    config.apply(props)
    return config


def run(args: argparse.Namespace) -> int:
    from groupstream.broker.run import run as run_broker

    config = build_config(args)

    def ready(broker: object) -> None:
        host, port = config.advertised
        print(f"groupstream broker ready on {config.host}:{config.port} (advertised {host}:{port})", flush=True)

    run_broker(config, ready)
    return 0
