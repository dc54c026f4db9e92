"""`ClosesOnExit`: ``with`` support for the client objects whose only exit action is ``close()``, written once."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class ClosesOnExit:
    """``with obj:`` returns ``obj`` and calls ``obj.close()`` on the way out, whatever happened."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
