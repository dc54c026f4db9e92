"""Fixtures of the security tests: certificates made once per session (tls_pki)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tls_pki import Pki, make_pki


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(Path(tmp_path_factory.mktemp("pki")))
