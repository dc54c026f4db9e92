"""What the client subcommands share: the bootstrap option, argument types that explain a bad value in one
line, and the consoles (tables on stdout, progress and summaries on stderr so stdout stays pipeable)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

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
    p.add_argument("--command-config", type=Path, default=None, metavar="FILE",
                   help="client properties, as Kafka's tools take them (security.protocol, sasl.*, ssl.*, ...)")  # fmt: skip


def read_properties(path: Path) -> dict[str, str]:
    """A Java properties file as Kafka's tools read ``--command-config``: ``key=value`` or ``key: value`` lines,
    ``#`` and ``!`` comments, a trailing backslash continuing a line (JAAS entries often span lines)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise UserError(f"--command-config {path}: {e.strerror or e}") from None
    props: dict[str, str] = {}
    pending = ""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = pending + raw.strip()
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        pending = ""
        if not line or line[0] in "#!":
            continue
        key, sep, value = _split_property(line)
        if not sep or not key:
            raise UserError(f"--command-config {path}, line {number}: expected key=value, got {raw.strip()!r}")
        props[key] = value
    return props


def _split_property(line: str) -> tuple[str, str, str]:
    cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
    if cut < 0:
        return line, "", ""
    return line[:cut].strip(), line[cut], line[cut + 1 :].strip()


def client_config(args: argparse.Namespace, **settings: object) -> dict[str, object]:
    """A client's configuration: ours, then the ``--command-config`` file's, then ``--bootstrap-server`` and
    the command's own ``settings`` (keyword names with underscores for dots)."""
    conf: dict[str, object] = {"client.id": "groupstream-cli"}
    path = getattr(args, "command_config", None)
    if path is not None:
        conf.update(read_properties(path))
    conf["bootstrap.servers"] = args.bootstrap_server
    conf.update({k.replace("_", "."): v for k, v in settings.items()})
    return conf


def open_admin(args: argparse.Namespace) -> Admin:
    try:
        return Admin(client_config(args))
    except ClientConfigError as e:
        raise UserError(f"{'--command-config' if getattr(args, 'command_config', None) else '--bootstrap-server'}: {e}") from None


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
