"""The console's pages as HTML, with the rebalance timeline as server-rendered SVG: pure (views in, text out).

No build step and almost no script: the pages are plain HTML that any browser draws, refreshed by the reader;
one line of script marks the body when the page is wider than the window (``data-overflow``), which the
browser tests check at two window sizes. Each owner of a partition gets a colour of its own; a gap in a
partition's row is time when nobody owned it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from groupstream.console.history import GroupHistory

_PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f")

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #222; max-width: 1200px; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25rem 0.75rem; text-align: left; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
h1 a { color: inherit; text-decoration: none; }
svg { max-width: 100%; height: auto; border: 1px solid #eee; }
.events li { font-variant-numeric: tabular-nums; }
"""


@dataclass(frozen=True, slots=True)
class TopicRow:
    name: str
    partitions: int
    end_offsets: int
    size_bytes: int | None  # None: not known (a client cannot ask Kafka for it without DescribeLogDirs)
    rate: float | None = None  # records written per second lately (None: not sampled twice yet)


@dataclass(frozen=True, slots=True)
class GroupRow:
    group_id: str
    protocol: str
    state: str
    members: int
    lag: int | None


@dataclass(frozen=True, slots=True)
class MemberRow:
    member_id: str
    client_id: str
    host: str
    assignment: str


@dataclass(frozen=True, slots=True)
class LagRow:
    topic: str
    partition: int
    committed: int
    end: int

    @property
    def lag(self) -> int:
        return max(0, self.end - self.committed)


def page(title: str, body: str) -> str:
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{_STYLE}</style></head><body>"
        f'<h1><a href="/">groupstream</a> · {escape(title)}</h1>{body}{_OVERFLOW_MARK}</body></html>'
    )


_OVERFLOW_MARK = (
    "<script>document.body.dataset.overflow = "
    "String(document.documentElement.scrollWidth > window.innerWidth);</script>"
)


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]], numeric: frozenset[int] = frozenset()) -> str:
    def cell(tag: str, i: int, v: object) -> str:
        cls = ' class="num"' if i in numeric else ""
        text = v if isinstance(v, _Raw) else escape(str(v))
        return f"<{tag}{cls}>{text}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(cell("td", i, v) for i, v in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


class _Raw(str):
    """Markup already escaped (a link)."""


def front_page(topics: Sequence[TopicRow], groups: Sequence[GroupRow]) -> str:
    topic_rows = [
        (t.name, t.partitions, f"{t.end_offsets:,}", "-" if t.size_bytes is None else f"{t.size_bytes:,}",
         "-" if t.rate is None else f"{t.rate:,.1f}")
        for t in topics
    ]  # fmt: skip
    group_rows = [
        (_Raw(f'<a href="/groups/{escape(g.group_id, quote=True)}">{escape(g.group_id)}</a>'), g.protocol, g.state,
         g.members, "" if g.lag is None else f"{g.lag:,}")
        for g in groups
    ]  # fmt: skip
    body = (
        f"<h2>Consumer groups ({len(groups)})</h2>"
        + _table(["group", "protocol", "state", "members", "lag"], group_rows, frozenset({3, 4}))
        + f"<h2>Topics ({len(topics)})</h2>"
        + _table(["topic", "partitions", "records (end offsets)", "bytes", "records/s"], topic_rows,
                 frozenset({1, 2, 3, 4}))
    )
    return page("overview", body)


def group_page(
    group: GroupRow,
    epoch: str,
    members: Sequence[MemberRow],
    lag: Sequence[LagRow],
    history: GroupHistory,
    lag_points: Sequence[tuple[int, int]] = (),
) -> str:
    member_rows = [(m.client_id, m.member_id, m.host, m.assignment) for m in members]
    lag_rows = [(r.topic, r.partition, f"{r.committed:,}", f"{r.end:,}", f"{r.lag:,}") for r in lag]
    total = sum(r.lag for r in lag)
    events = "".join(f"<li>{_clock(e.time_ms)} {escape(e.text)}</li>" for e in history.events[-200:])
    body = (
        f"<p>{escape(group.protocol)} group, state <strong>{escape(group.state)}</strong>, {escape(epoch)}, "
        f"{group.members} members, lag <strong>{total:,}</strong></p>"
        "<h2>Members</h2>"
        + _table(["client id", "member id", "host", "assignment"], member_rows)
        + "<h2>Lag</h2>"
        + lag_svg(lag_points)
        + _table(["topic", "partition", "committed", "end", "lag"], lag_rows, frozenset({1, 2, 3, 4}))
        + "<h2>Rebalance timeline</h2>"
        + timeline_svg(history)
        + f'<ol class="events">{events}</ol>'
    )
    return page(f"group {group.group_id}", body)


def _clock(ms: int) -> str:
    import time

    return time.strftime("%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}"


def timeline_svg(h: GroupHistory, width: int = 1000, row: int = 22) -> str:
    """One row per partition, one coloured bar per owner's span; empty when the log holds no history."""
    rows = sorted(h.ownership)
    if not rows or h.first_ms is None or h.last_ms is None:
        return '<p class="no-history">No rebalance recorded for this group yet.</p>'
    start, end = h.first_ms, max(h.last_ms, h.first_ms + 1)
    end += max((end - start) // 20, 1)  # room after the last change: the present
    label_w, legend_h = 160, 24 * ((len(h.owners()) + 3) // 4)
    plot_w = width - label_w - 10
    colours = {o: _PALETTE[i % len(_PALETTE)] for i, o in enumerate(h.owners())}

    def x(t: int) -> float:
        return label_w + plot_w * (t - start) / (end - start)

    parts = []
    for i, partition in enumerate(rows):
        y = 10 + i * row
        name = f"{partition[0]}-{partition[1]}"
        parts.append(f'<text x="{label_w - 6}" y="{y + row * 0.65:.0f}" text-anchor="end" font-size="12">'
                     f"{escape(name)}</text>")  # fmt: skip
        parts.append(f'<line x1="{label_w}" x2="{width - 10}" y1="{y + row / 2}" y2="{y + row / 2}" stroke="#eee"/>')
        for s in h.ownership[partition]:
            x0, x1 = x(s.start_ms), x(s.end_ms if s.end_ms is not None else end)
            parts.append(
                f'<rect class="span" data-partition="{escape(name, quote=True)}" data-owner="{escape(s.owner, quote=True)}"'
                f' x="{x0:.1f}" y="{y + 3}" width="{max(x1 - x0, 1):.1f}" height="{row - 6}" fill="{colours[s.owner]}">'
                f"<title>{escape(name)}: {escape(s.owner)} from {_clock(s.start_ms)}</title></rect>"
            )
    legend_y = 20 + len(rows) * row
    for i, owner in enumerate(h.owners()):
        lx, ly = label_w + (i % 4) * (plot_w // 4), legend_y + (i // 4) * 24
        parts.append(f'<rect x="{lx}" y="{ly}" width="14" height="14" fill="{colours[owner]}"/>'
                     f'<text class="owner" x="{lx + 20}" y="{ly + 12}" font-size="12">{escape(owner)}</text>')  # fmt: skip
    height = legend_y + legend_h + 10
    return (f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}">{"".join(parts)}</svg>')  # fmt: skip


def lag_svg(points: Sequence[tuple[int, int]], width: int = 1000, height: int = 160) -> str:
    """The group's total lag over time as a line (one point per sample), its largest value and time span
    marked; nothing to draw before two samples."""
    if len(points) < 2:
        return '<p class="no-lag-chart">The lag chart starts after two samples.</p>'
    t0, t1 = points[0][0], max(points[-1][0], points[0][0] + 1)
    top = max(max(v for _, v in points), 1)
    left, bottom, plot_w, plot_h = 60, height - 24, width - 70, height - 40

    def xy(t: int, v: int) -> str:
        return f"{left + plot_w * (t - t0) / (t1 - t0):.1f},{bottom - plot_h * v / top:.1f}"

    line = " ".join(xy(t, v) for t, v in points)
    return (
        f'<svg class="lag" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" data-points="{len(points)}">'
        f'<line x1="{left}" y1="{bottom}" x2="{width - 10}" y2="{bottom}" stroke="#999"/>'
        f'<line x1="{left}" y1="{bottom}" x2="{left}" y2="{bottom - plot_h}" stroke="#999"/>'
        f'<text x="{left - 6}" y="{bottom - plot_h + 10}" text-anchor="end" font-size="12">{top:,}</text>'
        f'<text x="{left - 6}" y="{bottom}" text-anchor="end" font-size="12">0</text>'
        f'<text x="{left}" y="{height - 6}" font-size="12">{_clock(t0)}</text>'
        f'<text x="{width - 10}" y="{height - 6}" text-anchor="end" font-size="12">{_clock(points[-1][0])}</text>'
        f'<polyline points="{line}" fill="none" stroke="#4e79a7" stroke-width="2"/></svg>'
    )
