"""The clocks both membership managers share: max.poll.interval.ms and the retry backoff."""

from __future__ import annotations

from groupstream.client.consumer.membership_timing import PollTimer, RetryBackoff


def test_the_poll_timer_expires_at_its_deadline_and_counts_from_the_last_poll() -> None:
    timer = PollTimer(1_000)
    assert not timer.expired(10**9) and timer.remaining_ms(5) is None  # not started
    timer.start(100)
    timer.start(500)  # a second subscribe does not restart it
    assert timer.remaining_ms(600) == 500
    assert not timer.expired(1_099) and timer.expired(1_100)  # Java's Timer: expired at >= deadline
    timer.poll_called(1_050)
    assert not timer.expired(2_049) and timer.expired(2_050) and timer.remaining_ms(3_000) == 0


def test_the_backoff_doubles_to_its_cap_and_success_resets_it() -> None:
    backoff = RetryBackoff(100, 1_000)
    assert backoff.wait_ms(0) == 0
    assert [backoff.failed(0) for _ in range(6)] == [100, 200, 400, 800, 1_000, 1_000]
    assert backoff.wait_ms(300) == 700
    backoff.succeeded()
    assert backoff.failures == 0 and backoff.wait_ms(0) == 0 and backoff.failed(50) == 150


def test_the_backoff_applies_the_jitter_it_is_given_and_never_caps_below_its_start() -> None:
    assert RetryBackoff(100, 1_000, jitter=lambda: 0.8).failed(0) == 80
    assert RetryBackoff(500, 100).failed(0) == 500  # retry.backoff.max.ms below retry.backoff.ms: the start wins
