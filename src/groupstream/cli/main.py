"""Entry point of the ``groupstream`` command: subcommands register themselves; user mistakes never print a
traceback, they print what is wrong and exit 2."""

from __future__ import annotations

import argparse
import os
import sys

from groupstream.broker.config import ConfigError
from groupstream.cli import (
    acls_cmd,
    broker_cmd,
    console_cmd,
    consume_cmd,
    demo_cmd,
    groups_cmd,
    leader_election_cmd,
    pipeline_cmd,
    produce_cmd,
    region_cmd,
    topics_cmd,
    transactions_cmd,
    users_cmd,
)
from groupstream.cli.errors import UserError
from groupstream.client.errors import ClientError, KafkaConnectionError

_COMMANDS = (
    broker_cmd,
    topics_cmd,
    produce_cmd,
    consume_cmd,
    groups_cmd,
    leader_election_cmd,
    pipeline_cmd,
    region_cmd,
    demo_cmd,
    users_cmd,
    acls_cmd,
    transactions_cmd,
    console_cmd,
)

__all__ = ["UserError", "build_parser", "main"]


def version_text() -> str:
    """The version, and which record decoder this installation runs (the C extension is built by pip when a
    compiler is there; without it the pure-Python decoder and encoder run, several times slower)."""
    from importlib.metadata import PackageNotFoundError, version

    from groupstream.protocol.records import record

    try:
        ours = version("groupstream")
    except PackageNotFoundError:
        ours = "(not installed)"
    decoder = "C extension" if record.c_decoder_loaded() else "pure Python (the C extension is not built)"
    return f"groupstream {ours}; record decoder: {decoder}; Python {sys.version.split()[0]}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="groupstream", description="Kafka consumer groups done right, in Python")
    parser.add_argument("--version", action="version", version=version_text())
    sub = parser.add_subparsers(dest="command", required=True)
    for mod in _COMMANDS:
        mod.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    name = getattr(args, "command_name", args.command)
    try:
        return int(args.func(args) or 0)
    except (UserError, ConfigError) as e:
        print(f"groupstream {name}: error: {e}", file=sys.stderr)
        return 2
    except KafkaConnectionError as e:
        print(f"groupstream {name}: error: broker {e}", file=sys.stderr)
        return 2
    except ClientError as e:
        print(f"groupstream {name}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader went away (``consume | head``): stop quietly, and keep Python from complaining at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
