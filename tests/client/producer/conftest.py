"""``PRODUCER_ENCODER=python`` runs the producer tests on the pure-Python encoder, the one an install without a
C compiler runs (``make`` runs them on the C encoder): both must pass the same tests."""

from __future__ import annotations

import os

import pytest

from groupstream.client.producer import encode


@pytest.fixture(autouse=True)
def producer_encoder(monkeypatch: pytest.MonkeyPatch) -> str:
    which = os.environ.get("PRODUCER_ENCODER", "c" if encode.C_ENCODER else "python")
    if which == "python":
        monkeypatch.setattr(encode, "append_record", encode.py_append_record)
        monkeypatch.setattr(encode, "append_rows", encode.py_append_rows)
        monkeypatch.setattr(encode, "append_routed", encode.py_append_routed)
        monkeypatch.setattr(encode, "key_partition", encode.py_key_partition)
    elif which != "c":
        raise pytest.UsageError(f"PRODUCER_ENCODER must be c or python, not {which!r}")
    return which
