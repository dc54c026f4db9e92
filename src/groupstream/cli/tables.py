"""How the CLI prints its tables: boxed (rich) on a terminal, plain aligned columns when piped, as
``kafka-consumer-groups.sh`` prints them (so ``grep`` and ``awk`` work, and nothing is cut at 80 columns),
or JSON lines for programs; ``--format table|plain|json`` chooses.

Plain columns are Kafka's: headers in capitals (``CURRENT-OFFSET``; ours in lower case get dashes for
spaces), values left-aligned and padded, two spaces between columns, ``-`` for an empty cell; a table's
title, when it has one, is the line before its header.
"""

from __future__ import annotations

import argparse
import json

from rich.table import Table
from rich.text import Text

from groupstream.cli.common import stdout

FORMATS = ("table", "plain", "json")


def add_format(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="table (boxed; the default on a terminal), plain (aligned columns as Kafka's tools print "
                        "them; the default when piped) or json (one object per table and line)")  # fmt: skip


def show(table: Table, args: argparse.Namespace) -> None:
    fmt = getattr(args, "format", None) or ("table" if stdout.is_terminal else "plain")
    if fmt == "table":
        stdout.print(table)
        return
    headers = [plain_header(c.header) for c in table.columns]
    rows = [[_text(cell) for cell in row] for row in zip(*(c.cells for c in table.columns), strict=True)]
    title = _text(table.title) if table.title is not None else None
    if fmt == "json":
        doc = {"title": title, "rows": [dict(zip(headers, r, strict=True)) for r in rows]}
        print(json.dumps(doc), flush=True)
        return
    cells = [headers, *([c or "-" for c in r] for r in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    if title:
        lines.insert(0, title)
    print("\n".join(lines) + "\n", flush=True)


def plain_header(header: object) -> str:
    text = _text(header).strip()
    return text if text.isupper() else text.upper().replace(" ", "-")


def _text(value: object) -> str:
    if isinstance(value, Text):
        return value.plain
    return Text.from_markup(str(value)).plain if isinstance(value, str) else str(value)
