"""The ACL bindings of one data dir, in memory and on disk (``<data dir>/acls``, a
`groupstream.security.checked_file`), so that ACLs created through CreateAcls survive restarts.

Changes are all-or-nothing: the new set is written (temporary file, fsync, rename, directory fsync) before it
is put in force, so a disk that refuses the write changes nothing, and a crash leaves the old set or the new.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from groupstream.security.acl import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType
from groupstream.security.checked_file import CheckedFileError, decode_checked, encode_checked
from groupstream.storage.fileio import atomic_write

__all__ = ["FILE_NAME", "AclFileError", "AclStore"]

FILE_NAME = "acls"
_MAGIC = "groupstream-acls"
_VERSION = 1


class AclFileError(CheckedFileError):
    """The ACL file cannot be read."""


def encode(bindings: Iterable[AclBinding]) -> bytes:
    rows = [
        {
            "resource_type": b.resource_type.name,
            "resource_name": b.resource_name,
            "pattern_type": b.pattern_type.name,
            "principal": b.principal,
            "host": b.host,
            "operation": b.operation.name,
            "permission": b.permission.name,
        }
        for b in sorted(set(bindings))
    ]
    return encode_checked(_MAGIC, _VERSION, {"acls": rows})


def decode(data: bytes, where: str = "the ACL file") -> list[AclBinding]:
    try:
        doc = decode_checked(data, _MAGIC, _VERSION, where, "ACL")
        return [
            AclBinding(
                ResourceType[r["resource_type"]],
                str(r["resource_name"]),
                PatternType[r["pattern_type"]],
                str(r["principal"]),
                str(r["host"]),
                Operation[r["operation"]],
                Permission[r["permission"]],
            )
            for r in doc["acls"]
        ]
    except CheckedFileError as e:
        raise AclFileError(str(e)) from None
    except (KeyError, TypeError, AttributeError) as e:
        raise AclFileError(f"{where} has a malformed body: {e!r}") from None


class AclStore:
    """Reads are for the event loop; `save` writes with fsyncs, so the broker calls it off the loop, one
    change at a time."""

    def __init__(self, data_dir: Path) -> None:
        """Loads the file when there is one; AclFileError when it is damaged, OSError when unreadable."""
        self.path = data_dir / FILE_NAME
        self._bindings: tuple[AclBinding, ...] = ()
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        self._bindings = tuple(decode(data, str(self.path)))

    @property
    def bindings(self) -> tuple[AclBinding, ...]:
        return self._bindings

    def matching(self, f: AclFilter) -> list[AclBinding]:
        return [b for b in self._bindings if f.matches(b)]

    def save(self, bindings: Sequence[AclBinding]) -> None:
        """Write ``bindings`` durably, then put them in force (not before). OSError when the disk refuses."""
        unique = tuple(sorted(set(bindings)))
        atomic_write(self.path, encode(unique))
        self._bindings = unique
