"""SCRAM credentials kept in the broker's data dir: one small versioned, CRC-checked file, replaced atomically.

Kafka keeps SCRAM credentials as records of its metadata log; a single broker has no metadata log, so they live
in ``<data dir>/scram-credentials``, a `groupstream.security.checked_file` whose JSON body holds users, then
mechanisms, each with the salt, iteration count, stored key and server key in base64.
Never a password. The file is replaced with write-to-temporary, fsync, rename and a directory fsync, so a crash
leaves the old set or the new one. A file that fails its check stops the broker with a message naming it: a
broker that started without its users would refuse everyone, or worse, come up with fewer of them than
acknowledged.

Changes are made by the broker while it runs (AlterUserScramCredentials) or by ``groupstream users`` while it
does not (the data dir's lock keeps the two apart).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

from groupstream.security.checked_file import CheckedFileError, decode_checked, encode_checked
from groupstream.security.scram import ScramCredential, ScramMechanism
from groupstream.storage.fileio import atomic_write

__all__ = ["FILE_NAME", "CredentialFileError", "CredentialStore", "Credentials", "decode", "encode"]

FILE_NAME = "scram-credentials"
_MAGIC = "groupstream-scram-credentials"
_VERSION = 1

Credentials = Mapping[str, Mapping[ScramMechanism, ScramCredential]]
"""User name to mechanism to credential."""


class CredentialFileError(CheckedFileError):
    """The credentials file cannot be read: damaged, truncated, or from a newer version."""


def encode(credentials: Credentials) -> bytes:
    users = {
        user: {
            mech.mechanism_name: {
                "salt": base64.b64encode(c.salt).decode("ascii"),
                "iterations": c.iterations,
                "stored_key": base64.b64encode(c.stored_key).decode("ascii"),
                "server_key": base64.b64encode(c.server_key).decode("ascii"),
            }
            for mech, c in sorted(mechs.items(), key=lambda kv: kv[0].type_id)
        }
        for user, mechs in sorted(credentials.items())
        if mechs
    }
    return encode_checked(_MAGIC, _VERSION, {"users": users})


def decode(data: bytes, where: str = "the credentials file") -> dict[str, dict[ScramMechanism, ScramCredential]]:
    try:
        doc = decode_checked(data, _MAGIC, _VERSION, where, "SCRAM credentials")
    except CheckedFileError as e:
        raise CredentialFileError(str(e)) from None
    try:
        out: dict[str, dict[ScramMechanism, ScramCredential]] = {}
        for user, mechs in doc["users"].items():
            entry: dict[ScramMechanism, ScramCredential] = {}
            for name, c in mechs.items():
                mech = ScramMechanism.from_name(name)
                if mech is None:
                    raise CredentialFileError(f"{where} names an unknown mechanism {name!r}")
                entry[mech] = ScramCredential(
                    salt=base64.b64decode(c["salt"], validate=True),
                    iterations=int(c["iterations"]),
                    stored_key=base64.b64decode(c["stored_key"], validate=True),
                    server_key=base64.b64decode(c["server_key"], validate=True),
                )
            out[str(user)] = entry
    except (KeyError, TypeError, ValueError, AttributeError, binascii.Error) as e:
        raise CredentialFileError(f"{where} has a malformed body: {e}") from None
    return out


class CredentialStore:
    """The credentials of one data dir, in memory and on disk. Reads are for the event loop; `save` does a
    disk write with fsyncs, so the broker calls it off the loop, one at a time."""

    def __init__(self, data_dir: Path) -> None:
        """Loads the file when there is one; CredentialFileError when it is damaged, OSError when unreadable."""
        self.path = data_dir / FILE_NAME
        self._users: dict[str, dict[ScramMechanism, ScramCredential]] = {}
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        self._users = decode(data, str(self.path))

    # --- reads (CredentialSource) ---------------------------------------------------------------------------

    def scram_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        mechs = self._users.get(user)
        return None if mechs is None else mechs.get(mechanism)

    def credentials_of(self, user: str) -> Sequence[tuple[ScramMechanism, ScramCredential]]:
        mechs = self._users.get(user, {})
        return sorted(mechs.items(), key=lambda kv: kv[0].type_id)

    def snapshot(self) -> Mapping[str, Mapping[ScramMechanism, ScramCredential]]:
        return MappingProxyType({u: MappingProxyType(dict(m)) for u, m in self._users.items()})

    # --- changes --------------------------------------------------------------------------------------------

    def changed(
        self,
        upserts: Sequence[tuple[str, ScramMechanism, ScramCredential]] = (),
        deletions: Sequence[tuple[str, ScramMechanism]] = (),
    ) -> dict[str, dict[ScramMechanism, ScramCredential]]:
        """The set with these changes applied, not yet saved (a deletion of what is absent is the caller's to
        refuse beforehand)."""
        users = {u: dict(m) for u, m in self._users.items()}
        for user, mech in deletions:
            mechs = users.get(user)
            if mechs is not None:
                mechs.pop(mech, None)
                if not mechs:
                    del users[user]
        for user, mech, credential in upserts:
            users.setdefault(user, {})[mech] = credential
        return users

    def save(self, users: dict[str, dict[ScramMechanism, ScramCredential]]) -> None:
        """Write ``users`` durably, then make them the ones in force (not before: a refused write changes
        nothing). OSError when the disk refuses."""
        atomic_write(self.path, encode(users))
        self._users = users
