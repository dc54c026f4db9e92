"""One checked transition for every state machine in groupstream.

Each state machine (a classic or consumer group in the coordinator, a client member, a connection, the region
operator, a transaction) is an enum of states and a `TransitionTable` saying from which states each state may
be entered, written as Kafka writes its tables. The machine changes state only through `TransitionTable.check`
(or `move`), so a bug that would take a step the table forbids fails loudly at that step, with the machine's
name and the states that were allowed, instead of confusing a peer later. Tests walk `pairs()` and every row.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Generic, TypeVar

__all__ = ["InvalidTransition", "TransitionTable"]

S = TypeVar("S", bound=Enum)


class InvalidTransition(RuntimeError):
    """Our bug, never a peer's: a state machine tried a step its table forbids, or was told of an event that
    cannot happen in its state. ``current`` and ``target`` name the step when it was one."""

    def __init__(self, message: str, current: Enum | None = None, target: Enum | None = None) -> None:
        super().__init__(message)
        self.current = current
        self.target = target


def _label(state: Enum) -> str:
    """How a state is named in errors: its value when that is a name (Kafka's, as peers print it), else its
    member name (states whose values are wire codes)."""
    return state.value if isinstance(state.value, str) else state.name


class TransitionTable(Generic[S]):
    """The valid previous states of every state of one machine; complete (every state has a row)."""

    __slots__ = ("_previous", "machine", "states")

    def __init__(self, machine: str, states: type[S], valid_previous: Mapping[S, frozenset[S]]) -> None:
        missing = [s.name for s in states if s not in valid_previous]
        if missing:
            raise ValueError(f"the state table of {machine} has no row for {', '.join(missing)}")
        self.machine = machine
        self.states = states
        self._previous: dict[S, frozenset[S]] = {s: frozenset(valid_previous[s]) for s in states}

    @classmethod
    def from_next(cls, machine: str, states: type[S], valid_next: Mapping[S, frozenset[S]]) -> TransitionTable[S]:
        """A table written the other way round: the states each state may go to."""
        previous: dict[S, set[S]] = {s: set() for s in states}
        for current, targets in valid_next.items():
            for target in targets:
                previous[target].add(current)
        return cls(machine, states, {s: frozenset(p) for s, p in previous.items()})

    def previous(self, target: S) -> frozenset[S]:
        """The states ``target`` may be entered from."""
        return self._previous[target]

    def allows(self, current: S, target: S) -> bool:
        return current in self._previous[target]

    def check(self, current: S, target: S, who: str | None = None) -> S:
        """``target`` if the table allows the step from ``current``; raises `InvalidTransition` otherwise,
        naming ``who`` (say, which group) or else the machine."""
        allowed = self._previous[target]
        if current not in allowed:
            after = ", ".join(sorted(_label(s) for s in allowed)) or "nothing"
            raise InvalidTransition(
                f"{who or self.machine} cannot go from {_label(current)} to {_label(target)} "
                f"({_label(target)} may only follow {after})",
                current,
                target,
            )
        return target

    def pairs(self) -> frozenset[tuple[S, S]]:
        """Every allowed (from, to) step: what the row tests walk."""
        return frozenset((p, s) for s, prevs in self._previous.items() for p in prevs)

    def __repr__(self) -> str:
        return f"TransitionTable({self.machine!r}, {len(self.pairs())} steps)"
