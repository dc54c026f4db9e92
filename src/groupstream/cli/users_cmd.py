"""``groupstream users add|list|delete``: SCRAM credentials in a broker's data dir, while no broker runs on it.

The offline counterpart of AlterUserScramCredentials, as ``kafka-storage format --add-scram`` is Kafka's: the
first administrator exists before the broker listens. The data dir's lock keeps it from changing the file under
a running broker (which is then changed online, with ``kafka-configs.sh --alter --entity-type users``).
"""

from __future__ import annotations

import argparse
import secrets
import sys
from pathlib import Path

from groupstream.cli.errors import UserError
from groupstream.security.credentials import FILE_NAME, CredentialFileError, CredentialStore
from groupstream.security.scram import MAX_ITERATIONS, MIN_ITERATIONS, ScramMechanism, make_credential
from groupstream.storage.dir_lock import DataDirLock, DataDirLockedError

MECHANISMS = [m.mechanism_name for m in ScramMechanism]
SALT_BYTES = 32


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("users", help="SCRAM users of a broker's data dir (while the broker is stopped)")
    actions = p.add_subparsers(dest="action", required=True)

    add = actions.add_parser("add", help="add a user, or set a user's password")
    _common(add)
    add.add_argument("--user", required=True)
    password = add.add_mutually_exclusive_group(required=True)
    password.add_argument("--password", help="the password (visible to other local users in the process list)")
    password.add_argument("--password-file", type=Path, metavar="FILE",
                          help="read the password from the first line of FILE ('-': standard input)")  # fmt: skip
    add.add_argument("--mechanism", action="append", choices=MECHANISMS, default=None,
                     help="SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable; default both). PLAIN logins are checked "
                          "against these credentials too")  # fmt: skip
    add.add_argument("--iterations", type=int, default=MIN_ITERATIONS,
                     help=f"PBKDF2 iterations, {MIN_ITERATIONS}-{MAX_ITERATIONS} (default {MIN_ITERATIONS})")  # fmt: skip
    add.set_defaults(func=run_add, command_name="users add")

    ls = actions.add_parser("list", help="list users and their mechanisms (never secrets)")
    _common(ls)
    ls.set_defaults(func=run_list, command_name="users list")

    delete = actions.add_parser("delete", help="delete a user's credentials")
    _common(delete)
    delete.add_argument("--user", required=True)
    delete.add_argument("--mechanism", action="append", choices=MECHANISMS, default=None,
                        help="delete only this mechanism's credential (repeatable; default all)")  # fmt: skip
    delete.set_defaults(func=run_delete, command_name="users delete")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", required=True, type=Path, help="the broker's data directory")


def _lock(data_dir: Path) -> DataDirLock:
    try:
        return DataDirLock(data_dir).acquire()
    except DataDirLockedError as e:
        raise UserError(
            f"{e}. Stop the broker first, or change users while it runs with AlterUserScramCredentials "
            f"(e.g. kafka-configs.sh --alter --entity-type users --entity-name USER --add-config "
            f"'SCRAM-SHA-256=[password=...]')"
        ) from None
    except OSError as e:
        raise UserError(f"cannot lock data dir {data_dir}: {e.strerror or e}") from None


def _store(data_dir: Path) -> CredentialStore:
    try:
        return CredentialStore(data_dir)
    except CredentialFileError as e:
        raise UserError(str(e)) from None
    except OSError as e:
        raise UserError(f"cannot read {data_dir / FILE_NAME}: {e.strerror or e}") from None


def _password(args: argparse.Namespace) -> str:
    if args.password is not None:
        password = str(args.password)
    else:
        try:
            if str(args.password_file) == "-":
                line = sys.stdin.readline()
            else:
                with open(args.password_file, encoding="utf-8") as f:
                    line = f.readline()
        except OSError as e:
            raise UserError(f"cannot read {args.password_file}: {e.strerror or e}") from None
        password = line.rstrip("\r\n")
    if not password:
        raise UserError("the password is empty")
    return password


def run_add(args: argparse.Namespace) -> int:
    if not args.user:
        raise UserError("--user is empty")
    if not MIN_ITERATIONS <= args.iterations <= MAX_ITERATIONS:
        raise UserError(f"--iterations must be within {MIN_ITERATIONS}-{MAX_ITERATIONS}, got {args.iterations}")
    password = _password(args)
    names = args.mechanism or MECHANISMS
    mechanisms = [m for m in ScramMechanism if m.mechanism_name in names]
    data_dir: Path = args.data_dir
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create data dir {data_dir}: {e.strerror or e}") from None
    lock = _lock(data_dir)
    try:
        store = _store(data_dir)
        existed = bool(store.credentials_of(args.user))
        upserts = [
            (args.user, m, make_credential(m, password, secrets.token_bytes(SALT_BYTES), args.iterations))
            for m in mechanisms
        ]
        try:
            store.save(store.changed(upserts=upserts))
        except OSError as e:
            raise UserError(f"cannot write {store.path}: {e.strerror or e}") from None
    finally:
        lock.release()
    verb = "updated" if existed else "added"
    print(f"{verb} {args.user} ({', '.join(m.mechanism_name for m in mechanisms)}, {args.iterations} iterations) "
          f"in {store.path}")  # fmt: skip
    return 0


def run_list(args: argparse.Namespace) -> int:
    data_dir: Path = args.data_dir
    if not data_dir.is_dir():
        raise UserError(f"data dir {data_dir} does not exist")
    users = _store(data_dir).snapshot()
    if not users:
        print(f"no SCRAM users in {data_dir}")
        return 0
    width = max(len("USER"), *(len(u) for u in users))
    print(f"{'USER':<{width}}  {'MECHANISM':<13}  ITERATIONS")
    for user in sorted(users):
        for mech, cred in sorted(users[user].items(), key=lambda kv: kv[0].type_id):
            print(f"{user:<{width}}  {mech.mechanism_name:<13}  {cred.iterations}")
    return 0


def run_delete(args: argparse.Namespace) -> int:
    data_dir: Path = args.data_dir
    if not data_dir.is_dir():
        raise UserError(f"data dir {data_dir} does not exist")
    lock = _lock(data_dir)
    try:
        store = _store(data_dir)
        have = {m for m, _ in store.credentials_of(args.user)}
        wanted = {m for m in ScramMechanism if m.mechanism_name in (args.mechanism or MECHANISMS)}
        if not have:
            raise UserError(f"user {args.user!r} has no SCRAM credentials in {data_dir}")
        missing = sorted(m.mechanism_name for m in wanted - have) if args.mechanism else []
        if missing:
            raise UserError(f"user {args.user!r} has no {', '.join(missing)} credential")
        gone = sorted(have & wanted, key=lambda m: m.type_id)
        try:
            store.save(store.changed(deletions=[(args.user, m) for m in gone]))
        except OSError as e:
            raise UserError(f"cannot write {store.path}: {e.strerror or e}") from None
    finally:
        lock.release()
    print(f"deleted {', '.join(m.mechanism_name for m in gone)} of {args.user} in {store.path}")
    return 0
