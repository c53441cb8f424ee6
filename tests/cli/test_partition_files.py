"""Kafka's partition JSON files (`replog/cli/partition_files.py`): what the admin commands
accept, and the one-line refusal, naming the file and the entry, for everything else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replog.cli.partition_files import (
    FileFormatError,
    PartitionOffset,
    PartitionReplicas,
    load,
    parse_election_partitions,
    parse_offsets,
    parse_reassignment,
    parse_topics_to_move,
    reassignment_document,
    reassignment_json,
)
from replog.errors import ReplogError


def test_a_reassignment_file_as_kafka_writes_it() -> None:
    text = json.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": "t", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]},
                {"topic": "t", "partition": 0, "replicas": [1, 2]},
            ],
        }
    )
    assert parse_reassignment(text, "f.json") == [
        PartitionReplicas("t", 1, (3, 1)),
        PartitionReplicas("t", 0, (1, 2)),
    ]


def test_reassignment_json_round_trips_sorted_and_compact() -> None:
    assignment = {("t", 1): (3, 1), ("a", 0): (2,), ("t", 0): (1, 2)}
    text = reassignment_json(assignment)
    assert text == (
        '{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[2]},'
        '{"topic":"t","partition":0,"replicas":[1,2]},{"topic":"t","partition":1,"replicas":[3,1]}]}'
    )
    assert json.loads(text) == reassignment_document(assignment)
    parsed = parse_reassignment(text, "x")
    assert {(p.topic, p.partition): p.replicas for p in parsed} == assignment


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{", "f.json: not valid JSON"),
        ("[]", "f.json: expected a JSON object, found a list"),
        ('{"version": 2, "partitions": []}', "version 2 is not supported"),
        ('{"version": 1}', 'f.json: no "partitions" list'),
        ('{"partitions": {}}', '"partitions" must be a list, found an object'),
        ('{"partitions": [3]}', "partitions[0]: expected an object, found a whole number"),
        ('{"partitions": [{"partition": 0, "replicas": [1]}]}', 'partitions[0]: no "topic"'),
        (
            '{"partitions": [{"topic": "t", "partition": "0", "replicas": [1]}]}',
            '"partition" must be a whole number, found a string',
        ),
        (
            '{"partitions": [{"topic": "t", "partition": true, "replicas": [1]}]}',
            '"partition" must be a whole number, found true/false',
        ),
        ('{"partitions": [{"topic": "t", "partition": -1, "replicas": [1]}]}', "is negative"),
        (
            '{"partitions": [{"topic": "t", "partition": 2147483648, "replicas": [1]}]}',
            "partition 2147483648 is above 2147483647",
        ),
        (
            '{"partitions": [{"topic": "t", "partition": 0, "replicas": [99999999999]}]}',
            '"replicas" holds a number outside the int32 range',
        ),
        ('{"partitions": [{"topic": "t", "partition": 0, "replicas": []}]}', "replicas is empty"),
        (
            '{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}',
            "(t-0): replicas [1, 1] name a broker twice",
        ),
        (
            '{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, "2"]}]}',
            '"replicas" must be a list of whole numbers',
        ),
        (
            '{"partitions": [{"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/d"]}]}',
            'log_dirs other than "any" are not supported',
        ),
        (
            '{"partitions": [{"topic": "t", "partition": 0, "replicas": [1]},'
            ' {"topic": "t", "partition": 0, "replicas": [2]}]}',
            "f.json: partition t-0 is listed twice",
        ),
    ],
)
def test_bad_reassignment_files_are_one_line(text: str, fragment: str) -> None:
    with pytest.raises(FileFormatError) as caught:
        parse_reassignment(text, "f.json")
    message = str(caught.value)
    assert fragment in message and message.startswith("f.json") and "\n" not in message


def test_topics_to_move() -> None:
    text = '{"topics": [{"topic": "a"}, {"topic": "b"}], "version": 1}'
    assert parse_topics_to_move(text, "m") == ["a", "b"]
    for bad, fragment in [
        ('{"topics": []}', "names no topic"),
        ('{"topics": [{"topic": "a"}, {"topic": "a"}]}', "topic 'a' is listed twice"),
        ('{"topics": [{"name": "a"}]}', 'no "topic"'),
    ]:
        with pytest.raises(FileFormatError, match=r"^m: ") as caught:
            parse_topics_to_move(bad, "m")
        assert fragment in str(caught.value)


def test_election_partitions() -> None:
    text = '{"partitions": [{"topic": "t", "partition": 2}, {"topic": "u", "partition": 0}]}'
    assert parse_election_partitions(text, "e") == [("t", 2), ("u", 0)]
    with pytest.raises(FileFormatError, match="names no partition"):
        parse_election_partitions('{"partitions": []}', "e")
    with pytest.raises(FileFormatError, match="partition t-2 is listed twice"):
        parse_election_partitions(
            '{"partitions": [{"topic": "t", "partition": 2}, {"topic": "t", "partition": 2}]}', "e"
        )


def test_offsets() -> None:
    text = (
        '{"partitions": [{"topic": "t", "partition": 0, "offset": 5},'
        ' {"topic": "t", "partition": 1, "offset": -1}], "version": 1}'
    )
    assert parse_offsets(text, "o") == [PartitionOffset("t", 0, 5), PartitionOffset("t", 1, -1)]
    with pytest.raises(FileFormatError, match=r"offset -2: must be >= 0, or -1"):
        parse_offsets('{"partitions": [{"topic": "t", "partition": 0, "offset": -2}]}', "o")
    with pytest.raises(FileFormatError, match='"offset" must be a whole number'):
        parse_offsets('{"partitions": [{"topic": "t", "partition": 0, "offset": 1.5}]}', "o")
    with pytest.raises(FileFormatError, match='no "offset"'):
        parse_offsets('{"partitions": [{"topic": "t", "partition": 0}]}', "o")
    with pytest.raises(FileFormatError, match="must be at most 9223372036854775807"):
        parse_offsets(
            '{"partitions": [{"topic": "t", "partition": 0, "offset": 99999999999999999999}]}',
            "o",
        )


def test_load_reads_the_file_or_names_why_not(tmp_path: Path) -> None:
    path = tmp_path / "e.json"
    path.write_text('{"partitions": [{"topic": "t", "partition": 0}]}')
    assert load(str(path), "--f", parse_election_partitions) == [("t", 0)]
    with pytest.raises(ReplogError, match=r"^--f .*missing\.json: No such file or directory$"):
        load(str(tmp_path / "missing.json"), "--f", parse_election_partitions)
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(ReplogError, match="not a UTF-8 text file"):
        load(str(path), "--f", parse_election_partitions)


def test_numbers_past_the_wire_limits_are_usage_errors() -> None:
    import argparse

    from replog.cli.arguments import at_least
    from replog.cli.console_consumer import offset_value
    from replog.record.varint import INT64_MAX

    with pytest.raises(argparse.ArgumentTypeError, match="must be at most 2147483647"):
        at_least(1)("99999999999")  # `topics create --partitions`, `--partition`
    assert at_least(1, INT64_MAX)("99999999999") == 99999999999  # `perf --num-records`
    with pytest.raises(argparse.ArgumentTypeError, match="at most 9223372036854775807"):
        offset_value("99999999999999999999")  # `consume --offset`
    assert offset_value(str(INT64_MAX)) == INT64_MAX
