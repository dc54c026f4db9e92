"""Entry point of the ``groupstream`` command: subcommands register themselves; user mistakes never print a
traceback, they print what is wrong and exit 2."""

from __future__ import annotations

import argparse
import os
import sys

from groupstream.broker.config import ConfigError
from groupstream.cli import (
    broker_cmd,
    consume_cmd,
    demo_cmd,
    groups_cmd,
    leader_election_cmd,
    pipeline_cmd,
    produce_cmd,
    region_cmd,
    topics_cmd,
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
)

__all__ = ["UserError", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="groupstream", description="Kafka consumer groups done right, in Python")
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
