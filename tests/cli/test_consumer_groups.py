"""`replog consumer-groups`' pure parts: the describe table (partitions committed or owned, lag,
members owning nothing) and the consumer protocol's assignment bytes, as Kafka's Java consumer
writes them (kafka-python's encoder as the oracle)."""

from __future__ import annotations

import struct

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from replog.cli.consumer_groups import (
    Member,
    assignment_text,
    describe_rows,
    members_json,
    members_rows,
    table,
)
from replog.coordinator.consumer_protocol import assigned_partitions


def test_assigned_partitions_read_kafkas_assignment_bytes() -> None:
    data = ConsumerProtocolAssignment(0, [("orders", [0, 2]), ("users", [1])], b"x")
    assert assigned_partitions(data.encode()) == [("orders", 0), ("orders", 2), ("users", 1)]
    assert assigned_partitions(b"") == []
    assert assigned_partitions(struct.pack(">hi", 0, 5)) == []  # cut short: no partitions


def test_describe_rows_join_commits_owners_and_log_end_offsets() -> None:
    rows = describe_rows(
        "g",
        [Member("m1", "/h1", "c1", [("t", 1)]), Member("m2", "/h2", "c2", [])],
        {("t", 0): 5, ("t", 1): None},
        {("t", 0): 9, ("t", 1): 4},
    )
    assert rows == [
        ("g", "t", 0, 5, 9, 4, None, None, None),
        ("g", "t", 1, None, 4, None, "m1", "/h1", "c1"),
        ("g", None, None, None, None, None, "m2", "/h2", "c2"),
    ]
    assert table(rows)[1] == ["g", "t", "0", "5", "9", "4", "-", "-", "-"]


def test_members_rows_count_each_members_partitions() -> None:
    members = [Member("m1", "/h1", "c1", [("t", 0), ("t", 1)]), Member("m2", "", "", [])]
    assert members_rows("g", members) == [
        ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"],
        ["g", "m1", "/h1", "c1", "2"],
        ["g", "m2", "-", "-", "0"],
    ]
    # Kafka's --verbose columns: a classic group has no epochs or target assignment.
    assert members_rows("g", members, verbose=True)[1] == [
        "g", "m1", "/h1", "c1", "2", "-", "t:0,1", "-", "-",
    ]  # fmt: skip


def test_members_rows_of_a_consumer_protocol_group_show_epochs_targets_and_types() -> None:
    """Kafka's --members --verbose: GROUP-INSTANCE-ID once a member has one, the member epoch
    and the group's target assignment epoch, and UPGRADED only for a group holding members
    of both protocols (a migrating group: KIP-848's online upgrade)."""
    consumer = Member(
        "m1", "/h1", "c1", [("u", 2), ("t", 1), ("t", 0)], "i1", "consumer", 5, [("t", 0)], 6
    )
    classic = Member("m2", "/h2", "c2", [], None, "classic", 4, [("t", 1)], 6)
    assert assignment_text(consumer.owned) == "t:0,1;u:2"
    assert members_rows("g", [consumer], verbose=True) == [
        [
            "GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
            "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT",
        ],
        ["g", "m1", "i1", "/h1", "c1", "3", "5", "t:0,1;u:2", "6", "t:0"],
    ]  # fmt: skip
    mixed = members_rows("g", [consumer, classic], verbose=True)
    assert mixed[0][-1] == "UPGRADED"
    assert [line[-1] for line in mixed[1:]] == ["true", "false"]
    assert mixed[2][2] == "-"  # no instance id
    assert "UPGRADED" not in members_rows("g", [consumer, classic])[0]  # verbose only
    (found,) = members_json("g", [consumer], verbose=True)
    assert found["memberType"] == "consumer" and found["groupInstanceId"] == "i1"
    assert found["targetAssignment"] == [{"topic": "t", "partition": 0}]
    assert found["currentEpoch"] == 5 and found["targetEpoch"] == 6
    (brief,) = members_json("g", [classic], verbose=False)
    assert "currentEpoch" not in brief and brief["memberType"] == "classic"


def test_reset_offsets_computes_each_strategy_clamped_to_the_log() -> None:
    import pytest

    from replog.cli.reset_offsets import ResetStrategy, new_offsets
    from replog.errors import ReplogError

    parts = [("t", 0), ("t", 1)]
    committed = {("t", 0): 7, ("t", 1): None}
    earliest = {("t", 0): 2, ("t", 1): 0}
    latest = {("t", 0): 10, ("t", 1): 4}
    at_time = {("t", 0): 5, ("t", 1): None}

    def reset(kind: str, value: int = 0, chosen: list[tuple[str, int]] = parts) -> list[int]:
        found = new_offsets(
            ResetStrategy(kind, value), chosen, committed, earliest, latest, at_time
        )
        return [found[tp] for tp in chosen]

    assert reset("earliest") == [2, 0]
    assert reset("latest") == [10, 4]
    assert reset("offset", 3) == [3, 3]
    assert reset("offset", 1) == [2, 1]  # below the log start: the log start
    assert reset("offset", 99) == [10, 4]  # past the high watermark: the high watermark
    assert reset("datetime", 123) == [5, 4]  # no record that late: the high watermark
    assert reset("shift", -10, [("t", 0)]) == [2]
    assert reset("shift", 2, [("t", 0)]) == [9]
    with pytest.raises(ReplogError, match="cannot shift the offset of t-1"):
        reset("shift", 1)


def test_reset_offsets_parses_topics_and_datetimes() -> None:
    import pytest

    from replog.cli.reset_offsets import parse_datetime, parse_topics
    from replog.errors import ReplogError

    assert parse_topics(["a", "b:0,2"]) == [("a", None), ("b", [0, 2])]
    for bad in ("b:x", ":1", "b:-1"):
        with pytest.raises(ReplogError, match="--topic"):
            parse_topics([bad])
    assert parse_datetime("2026-01-31T12:00:00.000Z") == 1_769_860_800_000
    assert parse_datetime("2026-01-31T13:00:00+01:00") == 1_769_860_800_000
    with pytest.raises(ReplogError, match="--to-datetime 'yesterday'"):
        parse_datetime("yesterday")
