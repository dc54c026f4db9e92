"""The console on the broker's HTTP port, in a real browser: headless Chromium (Debian's, which `make test`
installs) loads the front page and a group's page while two confluent-kafka members share a topic. The
pages must show the group, its members' client ids and its lag, and a rebalance timeline in which the
second member's join and the partitions it took are visible; at two window sizes the page must fit the
window (the page marks itself when it does not), and a screenshot must be drawn."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import uuid
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from http_broker import HttpBroker

from support.waiting import wait_until

pytestmark = [pytest.mark.compat, pytest.mark.broker_ours]


def chromium() -> str:
    path = shutil.which("chromium")
    assert path is not None, "chromium is not installed: run `make system-deps` (apt-get install chromium)"
    return path


def browse(url: str, *flags: str, width: int = 1280, height: int = 900) -> subprocess.CompletedProcess[str]:
    """Chromium, headless, as root (no sandbox) with a window of its own size; the page's DOM after its
    script ran is on stdout with ``--dump-dom``."""
    return subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--window-size={width},{height}", *flags, url],
                          capture_output=True, text=True, timeout=90, check=True)  # fmt: skip


class _Spans(HTMLParser):
    """The timeline's bars: (partition, owner) of each ``rect.span``; and the body's data-overflow."""

    def __init__(self) -> None:
        super().__init__()
        self.spans: list[tuple[str, str]] = []
        self.overflow: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "rect" and a.get("class") == "span":
            self.spans.append((a.get("data-partition") or "", a.get("data-owner") or ""))
        if tag == "body":
            self.overflow = a.get("data-overflow")


def parsed(dom: str) -> _Spans:
    p = _Spans()
    p.feed(dom)
    return p


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpBroker]:
    with HttpBroker(tmp_path_factory.mktemp("console")) as b:
        yield b


def test_console_pages_show_the_group_its_lag_and_the_second_members_join(broker: HttpBroker, tmp_path: Path) -> None:
    topic, group = f"orders-{uuid.uuid4().hex[:6]}", f"billing-{uuid.uuid4().hex[:6]}"
    conf = {"bootstrap.servers": broker.bootstrap}
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(30)
    producer = Producer(conf)
    for i in range(400):
        producer.produce(topic, b"v", partition=i % 4)
    assert producer.flush(30) == 0

    alpha = Consumer({**conf, "group.id": group, "client.id": "alpha", "enable.auto.commit": False,
                      "session.timeout.ms": 6000})  # fmt: skip
    beta = Consumer({**conf, "group.id": group, "client.id": "beta", "enable.auto.commit": False,
                     "session.timeout.ms": 6000})  # fmt: skip
    try:
        alpha.subscribe([topic])
        wait_until(lambda: alpha.poll(0.1) is None and len(alpha.assignment()) == 4, 30, "alpha to hold 4 partitions")
        alpha.commit(offsets=[TopicPartition(topic, p, 60) for p in range(4)], asynchronous=False)
        beta.subscribe([topic])

        def shared() -> bool:
            alpha.poll(0.1)
            beta.poll(0.1)
            return len(alpha.assignment()) == 2 and len(beta.assignment()) == 2

        wait_until(shared, 30, "alpha and beta to hold two partitions each")
        betas = sorted(f"{tp.topic}-{tp.partition}" for tp in beta.assignment())

        front = browse(f"{broker.http}/", "--dump-dom").stdout
        assert f'href="/groups/{group}"' in front and topic in front, front[-2000:]
        row = re.search(rf"<tr><td><a [^>]*>{group}</a></td><td>classic</td><td>Stable</td>"
                        r'<td class="num">2</td><td class="num">([\d,]+)</td></tr>', front)  # fmt: skip
        assert row is not None and row.group(1) == "160", front[-2000:]  # 4 x (100 - 60)

        page = browse(f"{broker.http}/groups/{group}", "--dump-dom").stdout
        assert "<td>alpha</td>" in page and "<td>beta</td>" in page
        assert 'lag <strong>160</strong>' in page
        points = re.search(r'<svg class="lag"[^>]* data-points="(\d+)"', page)  # sampled by the front page and this
        assert points is not None and int(points.group(1)) >= 2, page[-3000:]
        view = parsed(page)
        assert view.overflow == "false"
        owners = {partition: owner for partition, owner in view.spans}  # the last span of each row is current
        assert sorted(p for p, o in owners.items() if o.startswith("beta")) == betas, view.spans
        assert all(o.startswith("alpha") for p, o in view.spans if p not in betas), view.spans
        assert sum(o.startswith("alpha") for _, o in view.spans) == 4, "alpha held all four before beta joined"
        assert "generation 2: 2 members (alpha, beta)" in page

        narrow = parsed(browse(f"{broker.http}/groups/{group}", "--dump-dom", width=800, height=600).stdout)
        assert narrow.overflow == "false", "the group page is wider than an 800-pixel window"
        shot = tmp_path / "group.png"
        browse(f"{broker.http}/groups/{group}", f"--screenshot={shot}")
        data = shot.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24]) == (1280, 900)
        assert len(data) > 20_000, "an almost empty screenshot"
    finally:
        alpha.close()
        beta.close()


def test_an_unknown_group_is_a_404_naming_the_pages(broker: HttpBroker) -> None:
    status, _, text = broker.get("/groups/no-such-group")
    assert status == 404 and "/groups/" in text and "/metrics" in text
