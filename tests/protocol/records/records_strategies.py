"""Hypothesis strategies shared by the record-batch tests."""

from __future__ import annotations

from hypothesis import strategies as st

from groupstream.protocol.records import Codec

codecs = st.sampled_from(list(Codec))

# Sizes that cross the 1-, 2- and 3-byte varint boundaries (63/64, 8191/8192) without making every example big.
payload = st.one_of(
    st.none(),
    st.binary(max_size=80),
    st.binary(min_size=60, max_size=200),
    st.integers(min_value=8180, max_value=8200).map(lambda n: bytes(n % 251 for n in range(n))),
)
header_value = st.one_of(st.none(), st.binary(max_size=70))
headers = st.lists(st.tuples(st.text(max_size=12), header_value), max_size=4).map(tuple)

# int64 timestamps whose deltas stay inside int64; include negatives (pre-1970, and Kafka's -1).
timestamp = st.integers(min_value=-(1 << 40), max_value=1 << 50)


@st.composite
def record_specs(
    draw: st.DrawFn, min_size: int = 1, max_size: int = 30
) -> list[tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]]:
    """``(offset_delta, timestamp, key, value, headers)`` with strictly increasing offset deltas."""
    n = draw(st.integers(min_value=min_size, max_value=max_size))
    gaps = draw(st.lists(st.sampled_from([1, 1, 1, 2, 70, 9000]), min_size=n, max_size=n))
    out = []
    delta = -1
    for gap in gaps:
        delta += gap
        out.append((delta, draw(timestamp), draw(payload), draw(payload), draw(headers)))
    return out
