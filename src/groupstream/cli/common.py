"""What the client subcommands share: the bootstrap option, argument types that explain a bad value in one
line, and the consoles (tables on stdout, progress and summaries on stderr so stdout stays pipeable)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from rich.console import Console

from groupstream.cli.errors import UserError
from groupstream.client.admin import Admin
from groupstream.client.errors import ClientConfigError

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")

stdout = Console(soft_wrap=True)
stderr = Console(stderr=True, soft_wrap=True)


def add_bootstrap(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
                   help=f"broker to connect to (default {DEFAULT_BOOTSTRAP})")


def open_admin(args: argparse.Namespace) -> Admin:
    try:
        return Admin({"bootstrap.servers": args.bootstrap_server, "client.id": "groupstream-cli"})
    except ClientConfigError as e:
        raise UserError(f"--bootstrap-server: {e}") from None


def positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {n}")
    return n


def non_negative_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {n}")
    return n


def parse_key_values(items: Sequence[str], option: str) -> dict[str, str]:
    """``k=v`` strings to a dict; a malformed one raises UserError naming the option and the item."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UserError(f"{option} expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"
