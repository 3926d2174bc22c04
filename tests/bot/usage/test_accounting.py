"""Accounting from status histories, as properties: restarts, retries, runs still going at a period's end."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.usage.accounting import HOLDING, Interval, period_bounds, running_intervals, running_seconds, unit_hours

T0 = datetime(2026, 11, 2, tzinfo=UTC)  # a Monday
STATUSES = ["queued", "starting", "running", "processing", "warning", "retrying", "stopping", "succeeded", "failed"]


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[tuple[str, datetime]], datetime | None, datetime | None, datetime]:
    """A run's status events at increasing times, Polyaxon's stamps, and now."""
    steps = draw(st.lists(st.tuples(st.sampled_from(STATUSES), st.integers(1, 20_000)), min_size=0, max_size=12))
    events, at = [], T0
    for status, gap in steps:
        at += timedelta(seconds=gap)
        events.append((status, at))
    now = at + timedelta(seconds=draw(st.integers(0, 50_000)))
    ended = bool(events) and events[-1][0] in ("succeeded", "failed")
    finished = events[-1][1] if ended else None
    started = draw(st.one_of(st.none(), st.just(events[0][1]) if events else st.none()))
    return events, started, finished, now


@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(1, 30))
def test_usage_is_split_across_periods_without_loss(history: tuple, cut_days: int) -> None:  # type: ignore[type-arg]
    events, started, finished, now = history
    spans = running_intervals(events, started_at=started, finished_at=finished, now=now)
    far_past, far_future = T0 - timedelta(days=365), now + timedelta(days=365)
    whole = unit_hours(spans, 4, far_past, far_future)
    cut = T0 + timedelta(days=cut_days)
    assert abs(unit_hours(spans, 4, far_past, cut) + unit_hours(spans, 4, cut, far_future) - whole) < 1e-6
    assert whole >= 0


@settings(max_examples=300, deadline=None)
@given(histories())
def test_usage_never_exceeds_the_time_held_and_counts_only_running(history: tuple) -> None:  # type: ignore[type-arg]
    events, started, finished, now = history
    spans = running_intervals(events, started_at=started, finished_at=finished, now=now)
    first = min([t for t in (started, *(at for _, at in events)) if t is not None], default=now)
    end = finished or now
    assert sum((s.end - s.start).total_seconds() for s in spans) <= max(0.0, (end - first).total_seconds()) + 1e-6
    assert all(a.end <= b.start for a, b in itertools.pairwise(spans))  # no time counted twice
    if not any(status in HOLDING for status, _ in events) and started is None:
        assert spans == []


def test_a_restart_counts_both_stretches_and_not_the_gap() -> None:
    at = [T0 + timedelta(minutes=m) for m in (0, 10, 15, 45)]
    events = [("running", at[0]), ("retrying", at[1]), ("running", at[2]), ("succeeded", at[3])]
    spans = running_intervals(events, started_at=at[0], finished_at=at[3], now=at[3])
    assert spans == [Interval(at[0], at[1]), Interval(at[2], at[3])]
    assert unit_hours(spans, 8, T0, T0 + timedelta(days=1)) == 8 * (40 / 60)


def test_a_run_still_going_at_the_periods_end_is_split_and_counts_to_now() -> None:
    start = T0 + timedelta(days=6, hours=23)  # Sunday 23:00
    now = T0 + timedelta(days=7, hours=2)  # Monday 02:00 of the next week
    spans = running_intervals([("running", start)], started_at=start, finished_at=None, now=now)
    week1, week2 = period_bounds("week", start), period_bounds("week", now)
    assert unit_hours(spans, 1, *week1) == 1.0 and unit_hours(spans, 1, *week2) == 2.0


def test_a_run_seen_only_before_and_after_uses_polyaxons_stamps() -> None:
    # queued, then succeeded between two ticks (or a sweep trial, mirrored without events): started_at tells.
    events = [("queued", T0), ("succeeded", T0 + timedelta(minutes=30))]
    spans = running_intervals(events, started_at=T0 + timedelta(minutes=5), finished_at=events[1][1], now=events[1][1])
    assert unit_hours(spans, 2, T0, T0 + timedelta(days=1)) == 2 * (25 / 60)


def test_period_bounds() -> None:
    now = datetime(2026, 12, 5, 9, 30, tzinfo=UTC)  # a Saturday
    assert period_bounds("week", now) == (datetime(2026, 11, 30, tzinfo=UTC), datetime(2026, 12, 7, tzinfo=UTC))
    assert period_bounds("month", now) == (datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))


def test_an_end_seen_a_tick_late_is_cut_at_polyaxons_finished_at() -> None:
    # The watcher saw `running` 3 s after Polyaxon's start and `succeeded` 5 s after its finish: the run held
    # its cores from started_at to finished_at, which is also what the card says it ran.
    started, finished = T0, T0 + timedelta(seconds=38)
    events = [("queued", T0 - timedelta(seconds=4)), ("running", T0 + timedelta(seconds=3))]
    events.append(("succeeded", finished + timedelta(seconds=5)))
    seconds = running_seconds(events, started_at=started, finished_at=finished, now=finished + timedelta(minutes=1))
    assert seconds == 38.0
    spans = running_intervals(events, started_at=started, finished_at=finished, now=finished)
    assert unit_hours(spans, 1, T0 - timedelta(days=1), T0 + timedelta(days=1)) * 3600 == 38.0


def test_a_stopped_run_holds_its_cores_while_it_stops_and_a_stop_before_running_holds_nothing() -> None:
    at = [T0 + timedelta(seconds=s) for s in (0, 20, 26, 27)]
    events = [("running", at[0]), ("stopping", at[1]), ("stopped", at[3])]
    assert running_seconds(events, started_at=at[0], finished_at=at[2], now=at[3]) == 26.0
    queued = [("queued", at[0]), ("stopping", at[1]), ("stopped", at[2])]
    assert running_seconds(queued, started_at=None, finished_at=at[2], now=at[3]) == 0.0


@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(0, 10))
def test_the_running_time_never_passes_polyaxons_stamps(history: tuple, late_s: int) -> None:  # type: ignore[type-arg]
    events, started, finished, now = history
    if finished is not None:  # the end observed late, as the watcher does
        events = [*events[:-1], (events[-1][0], finished + timedelta(seconds=late_s))]
    seconds = running_seconds(events, started_at=started, finished_at=finished, now=now)
    if started is not None and finished is not None:
        assert seconds <= (finished - started).total_seconds() + 1e-6
    if started is not None and finished is not None and all(s in HOLDING for s, _ in events[:-1]):
        assert seconds == (finished - started).total_seconds()
