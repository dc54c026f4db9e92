"""The format of the broker's small security files (SCRAM credentials, ACLs): a header line
``<magic> <version> <crc32c of the body>`` and a JSON body.

Kafka keeps both as records of its metadata log; a single broker has none, so each set lives in one file of
the data dir, replaced atomically as a whole (`groupstream.storage.fileio.atomic_write`). A file that fails
its check must stop the broker with a message naming it: a broker that started without its users or its ACLs
would refuse everyone, or let everyone in.
"""

from __future__ import annotations

import json
from typing import Any

import crc32c


class CheckedFileError(Exception):
    """The file cannot be read: damaged, truncated, not this kind of file, or from a newer version."""


def encode_checked(magic: str, version: int, body: object) -> bytes:
    text = json.dumps(body, sort_keys=True, indent=1).encode("utf-8") + b"\n"
    return f"{magic} {version} {crc32c.crc32c(text):08x}\n".encode("ascii") + text


def decode_checked(data: bytes, magic: str, version: int, where: str, kind: str) -> Any:
    """The JSON body, once the header and checksum hold; CheckedFileError naming ``where`` otherwise."""
    header, sep, body = data.partition(b"\n")
    parts = header.decode("ascii", "replace").split(" ")
    if not sep or len(parts) != 3 or parts[0] != magic:
        raise CheckedFileError(f"{where} is not a groupstream {kind} file (bad header)")
    try:
        found = int(parts[1])
        crc = int(parts[2], 16)
    except ValueError:
        raise CheckedFileError(f"{where} has a damaged header") from None
    if found > version:
        raise CheckedFileError(f"{where} is version {found}, written by a newer groupstream (this reads {version})")
    if crc32c.crc32c(body) != crc:
        raise CheckedFileError(f"{where} is damaged (its checksum does not match): restore it from a backup")
    try:
        return json.loads(body)
    except ValueError as e:
        raise CheckedFileError(f"{where} has a malformed body: {e}") from None
