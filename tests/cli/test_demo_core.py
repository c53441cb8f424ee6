"""The pure parts of `replog demo`: its events, the exactly-once check, the per-second series,
and the Java version rule of the Spark step.

The check is fed hand-made logs, one violation at a time, so each rule is shown to fail when
it should; the clean log shows it passes otherwise. The whole demo on a real cluster is
tests/test_main_job.py.
"""

from __future__ import annotations

import pytest

from replog.cli.demo_events import Event, amount_for, key_group, nth_event, parse_event
from replog.cli.demo_series import Sample, progress_line, rate, series_table
from replog.cli.demo_spark import java_major
from replog.cli.demo_verify import LogRecord, verify

# --- events ---------------------------------------------------------------------------------------


def test_events_go_round_the_keys_numbering_each_key_from_zero() -> None:
    events = [nth_event(i, 3) for i in range(7)]
    assert [(e.key, e.seq) for e in events] == [
        ("user-0", 0),
        ("user-1", 0),
        ("user-2", 0),
        ("user-0", 1),
        ("user-1", 1),
        ("user-2", 1),
        ("user-0", 2),
    ]
    assert all(
        1 <= e.amount <= 9999 and e.amount == amount_for(e.key_number, e.seq) for e in events
    )


def test_an_event_survives_its_record_form() -> None:
    event = nth_event(1234, 100)
    assert event.record_value() == b'{"key":"user-34","seq":12,"amount":%d}' % event.amount
    assert parse_event(event.record_key(), event.record_value()) == event


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        (None, b"{}", "without key"),
        (b"user-1", None, "without value"),
        (b"user-1", b"not json", "is not a demo event"),
        (b"user-1", b'{"key":"user-1","seq":0}', "is not a demo event"),
        (b"user-2", nth_event(1, 100).record_value(), "differs from the value's key"),
        (b"bob", b'{"key":"bob","seq":0,"amount":1}', "is not a demo key"),
        (b"user-1", b'{"key":"user-1","seq":0,"amount":1}', "was not sent"),
    ],
)
def test_a_record_that_is_not_a_demo_event_is_named(
    key: bytes | None, value: bytes | None, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_event(key, value)


def test_key_groups_are_the_last_digit() -> None:
    assert key_group(13) == "*3"
    assert key_group(90) == "*0"


# --- the exactly-once check -----------------------------------------------------------------------

KEYS = 4


def stream(count: int) -> list[Event]:
    return [nth_event(i, KEYS) for i in range(count)]


def as_log(events: list[Event]) -> list[LogRecord]:
    """The events in one partition per key (key k -> partition k % 2), offsets dense."""
    records = []
    next_offset = {0: 0, 1: 0}
    for event in events:
        partition = event.key_number % 2
        records.append(LogRecord(partition, next_offset[partition], event))
        next_offset[partition] += 1
    return sorted(records, key=lambda r: (r.partition, r.offset))


def ids(events: list[Event]) -> set[tuple[str, int]]:
    return {(e.key, e.seq) for e in events}


def test_a_clean_log_passes_with_its_figures() -> None:
    events = stream(20)
    result = verify(ids(events), set(), 20, as_log(events))
    assert result.ok, result.problems()
    assert result.problems() == []
    assert (result.records_in_log, result.acknowledged, result.acknowledged_found_once) == (
        20,
        20,
        20,
    )
    assert result.per_partition == {0: 10, 1: 10}
    assert result.total_amount == sum(e.amount for e in events)


def test_a_lost_acknowledged_event_fails() -> None:
    events = stream(20)
    result = verify(ids(events), set(), 20, as_log(events[:7] + events[8:]))
    assert not result.ok
    assert result.lost == [(events[7].key, events[7].seq)]
    assert result.problems() == ["1 acknowledged events missing from the log (lost): user-3 seq 1"]


def test_a_duplicate_fails_even_of_an_unacknowledged_event() -> None:
    events = stream(8)
    acknowledged = ids(events[:7])
    failed = ids(events[7:])
    result = verify(acknowledged, failed, 8, as_log([*events, events[7]]))
    assert not result.ok
    assert result.duplicated == [(events[7].key, events[7].seq)]
    assert result.lost == []


def test_events_of_a_key_out_of_order_fail() -> None:
    events = stream(12)
    swapped = list(events)
    swapped[0], swapped[4] = swapped[4], swapped[0]  # user-0 seq 1 before seq 0
    result = verify(ids(events), set(), 12, as_log(swapped))
    assert not result.ok
    assert len(result.out_of_order) == 1
    assert result.out_of_order[0].startswith("user-0 seq 0 at 0@")


def test_a_key_in_two_partitions_fails() -> None:
    events = stream(8)
    records = as_log(events)
    moved = [r for r in records if r.event is not None and r.event.key == "user-0"][-1]
    records[records.index(moved)] = LogRecord(1, 99, moved.event)
    result = verify(ids(events), set(), 8, sorted(records, key=lambda r: (r.partition, r.offset)))
    assert result.out_of_order, "the same key in another partition must be flagged"


def test_records_never_sent_fail() -> None:
    events = stream(8)
    stray = LogRecord(0, 50, None, "value b'x' is not a demo event")
    extra = nth_event(100, KEYS)  # a demo event the producer never sent
    result = verify(ids(events), set(), 8, [*as_log(events), stray, LogRecord(1, 60, extra)])
    assert not result.ok
    assert len(result.stray) == 2
    assert "0@50 (value b'x' is not a demo event)" in result.stray


def test_failed_sends_are_reported_not_lost_whether_written_or_not() -> None:
    events = stream(12)
    acknowledged = ids(events[:10])
    failed = ids(events[10:])
    written = verify(acknowledged, failed, 12, as_log(events))  # both failed ones written
    gap = verify(acknowledged, failed, 12, as_log(events[:10]))  # neither written
    for result in (written, gap):
        assert result.ok, result.problems()
        assert result.failed == 2
    assert (written.failed_in_log, gap.failed_in_log) == (2, 0)


def test_unresolved_sends_fail() -> None:
    events = stream(5)
    result = verify(ids(events), set(), 6, as_log(events))
    assert not result.ok
    assert result.problems() == ["1 sends neither acknowledged nor failed"]


def test_many_violations_are_counted_not_all_listed() -> None:
    events = stream(40)
    result = verify(ids(events), set(), 40, [])
    (line,) = result.problems()
    assert line.startswith("40 acknowledged events missing from the log (lost): ")
    assert line.endswith(" and 35 more")


# --- the series -----------------------------------------------------------------------------------


def test_rates_divide_by_the_real_interval() -> None:
    first = Sample(1.0, 1000, 0, 0)
    second = Sample(3.0, 5000, 0, 0)
    assert rate(None, first) == 1000
    assert rate(first, second) == 2000
    assert rate(second, second) == 0


def test_the_progress_line_shows_unknown_urp_and_notes() -> None:
    line = progress_line(None, Sample(2.0, 1500, 1, None, "SIGKILL node 2"))
    assert line == "  t=  2.0s  acked    1,500     750 acks/s  failed 1  URP ?  <- SIGKILL node 2"


def test_the_table_is_transposed_and_folded_to_the_width() -> None:
    samples = [Sample(float(t), 1000 * t, 0, 3 if 5 <= t < 9 else 0) for t in range(1, 31)]
    samples[4] = Sample(5.0, 5000, 0, 3, "SIGKILL node 1")
    lines = series_table(samples, width=60)
    assert all(len(line) <= 60 for line in lines)
    rows = [line for line in lines if line]
    labels = [line.split()[0] for line in rows if not line.startswith("  *")]
    assert set(labels) == {"t", "acks/s", "URP"}
    header_cells = [c for line in rows if line.startswith("t (s)") for c in line[5:].split()]
    assert header_cells == [f"{t}*" if t == 5 else str(t) for t in range(1, 31)]
    urp_cells = [c for line in rows if line.startswith("URP") for c in line[3:].split()]
    assert urp_cells == ["3" if 5 <= t < 9 else "0" for t in range(1, 31)]
    assert lines[-1] == "  * t=5s: SIGKILL node 1"
    assert series_table([]) == ["(no samples)"]


# --- Java -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('openjdk version "21" 2023-09-19', 21),
        ('java version "1.8.0_392"', 8),
        ("something else", None),
    ],
)
def test_the_java_major_version_is_read_from_java_version(output: str, major: int | None) -> None:
    assert java_major(output) == major
