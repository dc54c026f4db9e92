"""A transactional producer the tests SIGSTOP (issue 17): opens a transaction, writes one record and prints
``ready``; after a line on stdin (sent once it was resumed) it tries to commit and prints ``committed`` or
``fatal <error>`` / ``abortable <error>``.

    python txn_zombie.py BOOTSTRAP TOPIC TRANSACTIONAL_ID
"""

from __future__ import annotations

import sys

from groupstream import Producer
from groupstream.client.producer.errors import TransactionError


def main() -> None:
    bootstrap, topic, tid = sys.argv[1:4]
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    p.init_transactions(60)
    p.begin_transaction()
    p.produce(topic, b"zombie", partition=0)
    assert p.flush(30) == 0
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        p.produce(topic, b"zombie-after-resume", partition=0)
        p.commit_transaction(30)
        print("committed", flush=True)
    except TransactionError as e:
        print(f"{'fatal' if e.fatal else 'abortable'} {e}", flush=True)
    p.close(5)


if __name__ == "__main__":
    main()
