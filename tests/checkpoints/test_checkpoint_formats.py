"""The checkpoint formats: Kafka's example files, every malformed case, and round trips."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

# Imports name the modules, not the package, so these tests also run against an editable
# install made before checkpoints/__init__.py existed (it maps `checkpoints` as a namespace).
from replog.checkpoints import text_format
from replog.checkpoints.clean_shutdown_marker import (
    CLEAN_SHUTDOWN_MARKER,
    parse_clean_shutdown_marker,
    render_clean_shutdown_marker,
)
from replog.checkpoints.leader_epoch_checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    EpochEntry,
    _parse_as_rendered,
    _parse_lines,
    parse_leader_epoch_checkpoint,
    render_leader_epoch_checkpoint,
)
from replog.checkpoints.offset_checkpoint import (
    RECOVERY_POINT_CHECKPOINT,
    parse_offset_checkpoint,
    render_offset_checkpoint,
)
from replog.checkpoints.text_format import INT32_MAX, INT64_MAX
from replog.errors import CorruptCheckpointError

OFFSET_SOURCE = f"/data/log-dir/{RECOVERY_POINT_CHECKPOINT}"
EPOCH_SOURCE = f"/data/log-dir/orders-0/{LEADER_EPOCH_CHECKPOINT}"
MARKER_SOURCE = f"/data/log-dir/{CLEAN_SHUTDOWN_MARKER}"

# The two example files of docs/design/storage.md#checkpoint-files, as Kafka writes them.
KAFKA_RECOVERY_POINTS = b"0\n2\norders 0 170410\norders 1 98\n"
KAFKA_LEADER_EPOCHS = b"0\n3\n0 0\n2 1500\n5 3200\n"


def corrupt_at(source: str, line_number: int, reason: str) -> pytest.RaisesExc[Exception]:
    """Expect CorruptCheckpointError naming `source`, `line_number` and (a part of) `reason`."""
    pattern = f"^{re.escape(source)}: line {line_number}: .*{re.escape(reason)}"
    return pytest.raises(CorruptCheckpointError, match=pattern)


# --- Kafka's examples ----------------------------------------------------------------------------


def test_kafka_recovery_point_example_parses_and_renders_back_byte_identically() -> None:
    offsets = parse_offset_checkpoint(KAFKA_RECOVERY_POINTS, source=OFFSET_SOURCE)
    assert offsets == {("orders", 0): 170410, ("orders", 1): 98}
    assert render_offset_checkpoint(offsets) == KAFKA_RECOVERY_POINTS


def test_kafka_leader_epoch_example_parses_and_renders_back_byte_identically() -> None:
    entries = parse_leader_epoch_checkpoint(KAFKA_LEADER_EPOCHS, source=EPOCH_SOURCE)
    assert entries == [EpochEntry(0, 0), EpochEntry(2, 1500), EpochEntry(5, 3200)]
    assert render_leader_epoch_checkpoint(entries) == KAFKA_LEADER_EPOCHS


def test_empty_input_is_an_empty_checkpoint_and_empty_values_render_with_count_zero() -> None:
    assert parse_offset_checkpoint(b"", source=OFFSET_SOURCE) == {}
    assert parse_leader_epoch_checkpoint(b"", source=EPOCH_SOURCE) == []
    assert render_offset_checkpoint({}) == b"0\n0\n"
    assert render_leader_epoch_checkpoint([]) == b"0\n0\n"
    assert parse_offset_checkpoint(b"0\n0\n", source=OFFSET_SOURCE) == {}


def test_fields_may_be_separated_by_any_run_of_ascii_whitespace() -> None:
    data = b"0\n2\norders\t0  7\norders \t 1\x0b8\n"
    assert parse_offset_checkpoint(data, source=OFFSET_SOURCE) == {
        ("orders", 0): 7,
        ("orders", 1): 8,
    }


def test_offsets_render_sorted_by_topic_then_partition() -> None:
    offsets = {("b", 1): 1, ("a.x", 10): 2, ("b", 0): 3, ("a.x", 9): 4}
    assert render_offset_checkpoint(offsets) == b"0\n4\na.x 9 4\na.x 10 2\nb 0 3\nb 1 1\n"


# --- Malformed files -----------------------------------------------------------------------------

# (file content, line named in the error, part of the reason)
MALFORMED_OFFSET_FILES = [
    pytest.param(b"1\n0\n", 1, "unsupported version 1, expected 0", id="bad-version"),
    pytest.param(b"-1\n0\n", 1, "unsupported version -1", id="negative-version"),
    pytest.param(b"v0\n0\n", 1, "version 'v0' is not an integer", id="non-integer-version"),
    pytest.param(b" 0\n0\n", 1, "is not an integer", id="padded-version"),
    pytest.param(b"0\n", 1, "no entry count follows the version", id="version-only"),
    pytest.param(b"0", 1, "no newline", id="version-without-newline"),
    pytest.param(b"0\ntwo\n", 2, "entry count 'two' is not an integer", id="non-integer-count"),
    pytest.param(b"0\n-1\n", 2, "negative entry count -1", id="negative-count"),
    pytest.param(b"0\n2\norders 0 170410\n", 2, "declares 2 entries but", id="count-too-high"),
    pytest.param(
        b"0\n1\norders 0 170410\norders 1 98\n", 4, "after the 1 declared", id="count-too-low"
    ),
    pytest.param(
        b"0\n2\norders 0 170410\norders 1 9", 4, "no newline: the file is truncated", id="torn"
    ),
    pytest.param(b"0\n1\norders 0 1\ngarbage\n", 4, "after the 1 declared", id="trailing-garbage"),
    pytest.param(b"0\n1\norders 0 1\n\n", 4, "after the 1 declared", id="trailing-blank-line"),
    pytest.param(b"0\n2\norders 0 1\n\n", 4, "blank line", id="blank-entry-line"),
    pytest.param(b"0\n1\norders 0 abc\n", 3, "offset 'abc' is not an integer", id="non-integer"),
    pytest.param(b"0\n1\norders 0 1.5\n", 3, "offset '1.5' is not an integer", id="float"),
    pytest.param(b"0\n1\norders 0 1_000\n", 3, "is not an integer", id="underscore-digits"),
    pytest.param(b"0\n1\norders x 1\n", 3, "partition 'x' is not an integer", id="bad-partition"),
    pytest.param(b"0\n1\norders 0 1 2\n", 3, "expected 3 fields, found 4", id="extra-field"),
    pytest.param(b"0\n1\norders 0\n", 3, "expected 3 fields, found 2", id="missing-field"),
    pytest.param(b"0\n1\n orders 0 1\n", 3, "leading or trailing whitespace", id="leading-space"),
    pytest.param(b"0\n1\norders 0 1 \n", 3, "leading or trailing whitespace", id="trailing-space"),
    pytest.param(b"0\n1\norders 0 1\r\n", 3, "leading or trailing whitespace", id="crlf"),
    pytest.param(b"0\n1\norders 0 -1\n", 3, "negative offset -1", id="negative-offset"),
    pytest.param(b"0\n1\norders -3 1\n", 3, "negative partition -3", id="negative-partition"),
    pytest.param(
        f"0\n1\norders 0 {INT64_MAX + 1}\n".encode(), 3, "larger than", id="offset-over-int64"
    ),
    pytest.param(b"0\n1\norders 0 " + b"9" * 40 + b"\n", 3, "out of range", id="huge-offset"),
    pytest.param(
        f"0\n1\norders {INT32_MAX + 1} 0\n".encode(), 3, "larger than", id="partition-over-int32"
    ),
    pytest.param(b"0\n1\nord?rs 0 1\n", 3, "topic 'ord?rs' has characters", id="bad-topic"),
    pytest.param("0\n1\nördérs 0 1\n".encode(), 3, "has characters outside", id="unicode-topic"),
    pytest.param(b"0\n1\n\xff\xfe 0 1\n", 3, "not UTF-8", id="not-utf8"),
    pytest.param(
        b"0\n2\norders 0 1\norders 0 2\n", 4, "orders-0 is listed twice", id="duplicate-entry"
    ),
]


@pytest.mark.parametrize(("data", "line_number", "reason"), MALFORMED_OFFSET_FILES)
def test_malformed_offset_checkpoint_names_file_line_and_reason(
    data: bytes, line_number: int, reason: str
) -> None:
    with corrupt_at(OFFSET_SOURCE, line_number, reason):
        parse_offset_checkpoint(data, source=OFFSET_SOURCE)


MALFORMED_LEADER_EPOCH_FILES = [
    pytest.param(b"0\n2\n3 0\n3 5\n", 4, "leader epoch 3 does not exceed 3", id="repeated-epoch"),
    pytest.param(b"0\n2\n3 0\n2 5\n", 4, "leader epoch 2 does not exceed 3", id="epoch-goes-back"),
    pytest.param(b"0\n2\n1 5\n2 5\n", 4, "start offset 5 does not exceed 5", id="repeated-start"),
    pytest.param(b"0\n2\n1 5\n2 4\n", 4, "start offset 4 does not exceed 5", id="start-goes-back"),
    pytest.param(b"0\n3\n0 0\n1 5\n1 9\n", 5, "does not exceed", id="third-line-out-of-order"),
    pytest.param(b"0\n1\n-1 0\n", 3, "negative leader epoch -1", id="negative-epoch"),
    pytest.param(b"0\n1\n0 -5\n", 3, "negative start offset -5", id="negative-start"),
    pytest.param(b"0\n1\n0 0 0\n", 3, "expected 2 fields, found 3", id="extra-field"),
    pytest.param(b"0\n1\nfive 0\n", 3, "leader epoch 'five' is not an integer", id="word"),
    pytest.param(b"0\n3\n0 0\n2 1500\n5 32", 5, "no newline", id="truncated-file"),
    pytest.param(b"1\n1\n0 0\n", 1, "unsupported version 1", id="bad-version"),
]


@pytest.mark.parametrize(("data", "line_number", "reason"), MALFORMED_LEADER_EPOCH_FILES)
def test_malformed_leader_epoch_checkpoint_names_file_line_and_reason(
    data: bytes, line_number: int, reason: str
) -> None:
    with corrupt_at(EPOCH_SOURCE, line_number, reason):
        parse_leader_epoch_checkpoint(data, source=EPOCH_SOURCE)


# --- Rendering refuses what parsing would refuse -------------------------------------------------


@pytest.mark.parametrize(
    ("offsets", "reason"),
    [
        ({("bad topic", 0): 1}, "has characters outside"),
        ({("", 0): 1}, "has characters outside"),
        ({("orders", -1): 1}, "negative partition -1"),
        ({("orders", 0): -1}, "negative offset -1"),
        ({("orders", 0): INT64_MAX + 1}, "larger than"),
    ],
)
def test_render_offset_checkpoint_rejects_unstorable_entries(
    offsets: dict[tuple[str, int], int], reason: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(reason)):
        render_offset_checkpoint(offsets)


@pytest.mark.parametrize(
    ("entries", "reason"),
    [
        ([EpochEntry(1, 0), EpochEntry(1, 5)], "leader epoch 1 does not exceed 1"),
        ([EpochEntry(1, 5), EpochEntry(2, 5)], "start offset 5 does not exceed 5"),
        ([EpochEntry(-1, 0)], "negative leader epoch -1"),
        ([EpochEntry(0, -1)], "negative start offset -1"),
        ([EpochEntry(INT32_MAX + 1, 0)], "larger than"),
    ],
)
def test_render_leader_epoch_checkpoint_rejects_unstorable_entries(
    entries: list[EpochEntry], reason: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(reason)):
        render_leader_epoch_checkpoint(entries)


# --- Round trips ---------------------------------------------------------------------------------

topics = st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True)
offset_maps = st.dictionaries(
    st.tuples(topics, st.integers(0, INT32_MAX)), st.integers(0, INT64_MAX), max_size=20
)


@st.composite
def epoch_entry_lists(draw: st.DrawFn) -> list[EpochEntry]:
    """Strictly increasing leader epochs paired with strictly increasing start offsets."""
    leader_epochs = draw(st.lists(st.integers(0, INT32_MAX), unique=True, max_size=20))
    start_offsets = draw(
        st.lists(
            st.integers(0, INT64_MAX),
            unique=True,
            min_size=len(leader_epochs),
            max_size=len(leader_epochs),
        )
    )
    return [
        EpochEntry(e, s) for e, s in zip(sorted(leader_epochs), sorted(start_offsets), strict=True)
    ]


@given(offset_maps)
def test_offset_checkpoint_round_trips(offsets: dict[tuple[str, int], int]) -> None:
    data = render_offset_checkpoint(offsets)
    assert parse_offset_checkpoint(data, source=OFFSET_SOURCE) == offsets
    assert data.count(b"\n") == 2 + len(offsets)


@given(offset_maps)
def test_the_offset_renderer_writes_what_the_general_renderer_writes(
    offsets: dict[tuple[str, int], int],
) -> None:
    entries = [(topic, partition, offset) for (topic, partition), offset in sorted(offsets.items())]
    assert render_offset_checkpoint(offsets) == text_format.render(entries)


@given(epoch_entry_lists())
def test_leader_epoch_checkpoint_round_trips(entries: list[EpochEntry]) -> None:
    data = render_leader_epoch_checkpoint(entries)
    assert parse_leader_epoch_checkpoint(data, source=EPOCH_SOURCE) == entries


@given(epoch_entry_lists())
def test_what_replog_writes_takes_the_leader_epoch_fast_path(entries: list[EpochEntry]) -> None:
    assert _parse_as_rendered(render_leader_epoch_checkpoint(entries)) == entries


@given(
    st.text("0123456789 \n", max_size=60).map(str.encode)
    | epoch_entry_lists().map(render_leader_epoch_checkpoint).map(lambda data: b"0\n" + data)
    | st.sampled_from(
        [
            b"0\n2\n1 5\n1 9\n",  # epochs not increasing
            b"0\n2\n1 5\n2 5\n",  # start offsets not increasing
            b"0\n1\n2147483648 0\n",  # epoch out of range
            b"0\n1\n1 9223372036854775808\n",  # start offset out of range
            b"0\n2\n1 5\n",  # fewer entries than declared
            b"0\n0\n1 5\n",  # more
            b"0\n1\n1 5",  # no last newline
        ]
    )
)
def test_the_leader_epoch_fast_path_takes_only_what_the_general_parser_accepts_alike(
    data: bytes,
) -> None:
    fast = _parse_as_rendered(data)
    if fast is None:
        return
    assert fast == _parse_lines(data, EPOCH_SOURCE)


def test_the_leader_epoch_fast_path_leaves_every_malformed_file_to_the_general_parser() -> None:
    for data in (b"0\n2\n1 5\n1 9\n", b"0\n1\n2147483648 0\n", b"0\n2\n1 5\n", b"0\n1\n1 5"):
        assert _parse_as_rendered(data) is None
        with pytest.raises(CorruptCheckpointError):
            parse_leader_epoch_checkpoint(data, source=EPOCH_SOURCE)


@given(st.binary(max_size=60) | st.text("0123456789 -\n\tab.?", max_size=60).map(str.encode))
def test_parsers_return_everything_or_raise_corrupt_checkpoint_error(data: bytes) -> None:
    for parse, source in (
        (parse_offset_checkpoint, OFFSET_SOURCE),
        (parse_leader_epoch_checkpoint, EPOCH_SOURCE),
    ):
        try:
            parse(data, source=source)
        except CorruptCheckpointError as e:
            assert re.match(rf"^{re.escape(source)}: line [1-9][0-9]*: ", str(e))


# --- Clean-shutdown marker -----------------------------------------------------------------------


def test_clean_shutdown_marker_renders_compact_json_and_parses_back() -> None:
    assert render_clean_shutdown_marker(4242) == b'{"version":0,"brokerEpoch":4242}'
    assert parse_clean_shutdown_marker(b'{"version":0,"brokerEpoch":4242}', source="m") == 4242
    # Key order and whitespace are JSON's business, not the marker's.
    assert parse_clean_shutdown_marker(b'{ "brokerEpoch": 7,\n "version": 0 }\n', source="m") == 7


@given(st.integers(-1, INT64_MAX))
def test_clean_shutdown_marker_round_trips(broker_epoch: int) -> None:
    data = render_clean_shutdown_marker(broker_epoch)
    assert parse_clean_shutdown_marker(data, source=MARKER_SOURCE) == broker_epoch


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        pytest.param(b"", "not JSON", id="empty-marker-of-old-kafka"),
        pytest.param(b'{"version":0,"brokerEpoch":', "not JSON", id="truncated"),
        pytest.param(b"\xff", "not UTF-8", id="not-utf8"),
        pytest.param(b"[0, 1]", "expected a JSON object, found list", id="array"),
        pytest.param(b'{"version":1,"brokerEpoch":5}', "unsupported version 1", id="bad-version"),
        pytest.param(
            b'{"version":false,"brokerEpoch":5}', "unsupported version", id="bool-version"
        ),
        pytest.param(b'{"version":0}', "expected keys brokerEpoch and version", id="no-epoch"),
        pytest.param(b'{"version":0,"brokerEpoch":5,"x":1}', "found ['brokerEpoch',", id="extra"),
        pytest.param(b'{"version":0,"brokerEpoch":"5"}', "broker epoch '5' is not", id="string"),
        pytest.param(b'{"version":0,"brokerEpoch":5.0}', "broker epoch 5.0 is not", id="float"),
        pytest.param(
            b'{"version":0,"brokerEpoch":true}', "broker epoch True is not", id="bool-epoch"
        ),
        pytest.param(b'{"version":0,"brokerEpoch":-2}', "broker epoch -2 is not", id="negative"),
        pytest.param(
            f'{{"version":0,"brokerEpoch":{INT64_MAX + 1}}}'.encode(), "is not an", id="too-large"
        ),
    ],
)
def test_malformed_clean_shutdown_marker_names_the_file(data: bytes, reason: str) -> None:
    with pytest.raises(CorruptCheckpointError) as raised:
        parse_clean_shutdown_marker(data, source=MARKER_SOURCE)
    assert str(raised.value).startswith(f"{MARKER_SOURCE}: ")
    assert reason in str(raised.value)


def test_render_clean_shutdown_marker_rejects_an_out_of_range_broker_epoch() -> None:
    with pytest.raises(ValueError, match="broker epoch -2"):
        render_clean_shutdown_marker(-2)
