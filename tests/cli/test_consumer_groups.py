"""`replog consumer-groups`' pure parts: the describe table (partitions committed or owned, lag,
members owning nothing) and the consumer protocol's assignment bytes, as Kafka's Java consumer
writes them (kafka-python's encoder as the oracle)."""

from __future__ import annotations

import struct

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from replog.cli.consumer_groups import describe_rows, members_rows, table
from replog.coordinator.consumer_protocol import assigned_partitions


def test_assigned_partitions_read_kafkas_assignment_bytes() -> None:
    data = ConsumerProtocolAssignment(0, [("orders", [0, 2]), ("users", [1])], b"x")
    assert assigned_partitions(data.encode()) == [("orders", 0), ("orders", 2), ("users", 1)]
    assert assigned_partitions(b"") == []
    assert assigned_partitions(struct.pack(">hi", 0, 5)) == []  # cut short: no partitions


def test_describe_rows_join_commits_owners_and_log_end_offsets() -> None:
    rows = describe_rows(
        "g",
        [("m1", "/h1", "c1", [("t", 1)]), ("m2", "/h2", "c2", [])],
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
    lines = members_rows("g", [("m1", "/h1", "c1", [("t", 0), ("t", 1)]), ("m2", "", "", [])])
    assert lines == [
        ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"],
        ["g", "m1", "/h1", "c1", "2"],
        ["g", "m2", "-", "-", "0"],
    ]
