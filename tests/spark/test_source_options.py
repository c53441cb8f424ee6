"""The read options of the replog source: parsed like Spark's Kafka source, errors naming them."""

from __future__ import annotations

import pytest

from replog.spark.errors import SourceOptionError
from replog.spark.options import (
    Assign,
    ByTimestamp,
    Earliest,
    Latest,
    Mode,
    SpecificOffsets,
    Subscribe,
    SubscribePattern,
    parse_options,
)

BASE = {"bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}


def parse(mode: Mode = Mode.BATCH, **extra: str) -> object:
    return parse_options({**BASE, **extra}, mode)


def test_defaults_follow_the_kafka_source() -> None:
    batch = parse_options(BASE, Mode.BATCH)
    assert batch.subscription == Subscribe(("t",))
    assert batch.starting == Earliest()
    assert batch.ending == Latest()
    assert batch.fail_on_data_loss is True
    assert batch.include_headers is False
    assert batch.max_offsets_per_trigger is None and batch.min_partitions is None
    assert parse_options(BASE, Mode.STREAMING).starting == Latest()


def test_keys_are_matched_without_case_as_spark_lowercases_them() -> None:
    opts = parse_options(
        {
            "bootstrap.servers": "h:1",
            "subscribepattern": "ev.*",
            "startingoffsets": '{"a": {"0": 5, "1": -2}}',
            "endingoffsets": '{"a": {"0": -1, "1": 9}}',
            "maxoffsetspertrigger": "60",
            "minpartitions": "4",
            "failondataloss": "FALSE",
            "includeheaders": "true",
        },
        Mode.BATCH,
    )
    assert isinstance(opts.subscription, SubscribePattern)
    assert opts.subscription.matches("events") and not opts.subscription.matches("xevents")
    assert opts.starting == SpecificOffsets("startingOffsets", {("a", 0): 5, ("a", 1): -2})
    assert opts.ending == SpecificOffsets("endingOffsets", {("a", 0): -1, ("a", 1): 9})
    assert (opts.max_offsets_per_trigger, opts.min_partitions) == (60, 4)
    assert opts.fail_on_data_loss is False and opts.include_headers is True


def test_subscribe_and_assign_are_sorted_and_deduplicated() -> None:
    assert parse(subscribe=" b, a ,b").subscription == Subscribe(("a", "b"))  # type: ignore[attr-defined]
    opts = parse_options(
        {"bootstrap.servers": "h:1", "assign": '{"y": [1, 0], "x": [2]}'}, Mode.BATCH
    )
    assert opts.subscription == Assign((("x", 2), ("y", 0), ("y", 1)))


def test_timestamps_take_precedence_over_starting_offsets() -> None:
    opts = parse(
        startingOffsets="earliest",
        startingOffsetsByTimestamp='{"t": {"0": 1000}}',
        startingTimestamp="5",
    )
    assert opts.starting == ByTimestamp("startingTimestamp", None, 5, False)  # type: ignore[attr-defined]
    opts = parse(
        startingOffsetsByTimestamp='{"t": {"0": 1000}}',
        startingOffsetsByTimestampStrategy="latest",
    )
    assert opts.starting == ByTimestamp(  # type: ignore[attr-defined]
        "startingOffsetsByTimestamp", {("t", 0): 1000}, None, True
    )


def test_min_offsets_and_trigger_delay_read_as_spark_reads_them() -> None:
    opts = parse(Mode.STREAMING, minOffsetsPerTrigger="50")
    assert (opts.min_offsets_per_trigger, opts.max_trigger_delay_ms) == (50, 15 * 60_000)  # type: ignore[attr-defined]
    durations = {"30s": 30_000, "500ms": 500, "2m": 120_000, "1min": 60_000, "1h": 3_600_000}
    durations |= {"1d": 86_400_000, "2500us": 2, " 250 ": 250}
    for given, ms in durations.items():
        assert parse(Mode.STREAMING, maxTriggerDelay=given).max_trigger_delay_ms == ms  # type: ignore[attr-defined]
    both = parse(Mode.STREAMING, minOffsetsPerTrigger="10", maxOffsetsPerTrigger="10")
    assert (both.min_offsets_per_trigger, both.max_offsets_per_trigger) == (10, 10)  # type: ignore[attr-defined]


def test_passthrough_client_settings_reach_the_consumer_and_admin() -> None:
    opts = parse_options(
        {**BASE, "kafka.request.timeout.ms": "40000", "kafka.fetch.max.wait.ms": "100"},
        Mode.BATCH,
    )
    assert opts.consumer_settings()["fetch.max.wait.ms"] == "100"
    assert opts.consumer_settings()["auto.offset.reset"] == "none"
    assert opts.admin_settings() == {
        "request.timeout.ms": "40000",
        "bootstrap.servers": "127.0.0.1:9092",
    }
    kafka_style = parse_options({"kafka.bootstrap.servers": "h:2", "subscribe": "t"}, Mode.BATCH)
    assert kafka_style.bootstrap_servers == "h:2"


@pytest.mark.parametrize(
    ("options", "mode", "named"),
    [
        ({"subscribe": "t"}, Mode.BATCH, "'bootstrap.servers' is required"),
        ({**BASE, "subscribe": "a,,b"}, Mode.BATCH, "'subscribe'"),
        ({**BASE, "assign": '{"t": [0]}'}, Mode.BATCH, "given: subscribe, assign"),
        ({"bootstrap.servers": "h:1"}, Mode.BATCH, "given: none"),
        ({"bootstrap.servers": "h:1", "subscribePattern": "("}, Mode.BATCH, "'subscribePattern'"),
        ({"bootstrap.servers": "h:1", "assign": "[1]"}, Mode.BATCH, "'assign'"),
        ({"bootstrap.servers": "h:1", "assign": '{"t": [-1]}'}, Mode.BATCH, "partition -1"),
        ({**BASE, "startingOffsets": "latest"}, Mode.BATCH, "'startingOffsets' cannot be"),
        ({**BASE, "startingOffsets": "soon"}, Mode.BATCH, "'startingOffsets' must be"),
        ({**BASE, "startingOffsets": '{"t": {"0": -1}}'}, Mode.BATCH, "t-0 has -1"),
        ({**BASE, "startingOffsets": '{"t": {"0": -3}}'}, Mode.STREAMING, "t-0 has -3"),
        ({**BASE, "startingOffsets": '{"t": {"x": 1}}'}, Mode.BATCH, "'x' of topic 't'"),
        ({**BASE, "startingOffsets": '{"t": {"0": "1"}}'}, Mode.BATCH, "not an integer"),
        ({**BASE, "endingOffsets": "earliest"}, Mode.BATCH, "'endingOffsets' cannot be"),
        ({**BASE, "endingOffsets": '{"t": {"0": -2}}'}, Mode.BATCH, "'endingOffsets': t-0"),
        ({**BASE, "endingOffsets": "latest"}, Mode.STREAMING, "not valid in streaming"),
        ({**BASE, "maxOffsetsPerTrigger": "0"}, Mode.STREAMING, "'maxOffsetsPerTrigger' must"),
        ({**BASE, "minOffsetsPerTrigger": "-1"}, Mode.STREAMING, "'minOffsetsPerTrigger' must"),
        (
            {**BASE, "minOffsetsPerTrigger": "11", "maxOffsetsPerTrigger": "10"},
            Mode.STREAMING,
            "'minOffsetsPerTrigger' (11) must not be above 'maxOffsetsPerTrigger' (10)",
        ),
        ({**BASE, "maxTriggerDelay": "soon"}, Mode.STREAMING, "'maxTriggerDelay' must be a dur"),
        ({**BASE, "maxTriggerDelay": "5 weeks"}, Mode.STREAMING, "got '5 weeks'"),
        ({**BASE, "maxTriggerDelay": "-5s"}, Mode.STREAMING, "'maxTriggerDelay'"),
        ({**BASE, "minPartitions": "many"}, Mode.BATCH, "'minPartitions' must be an integer"),
        ({**BASE, "failOnDataLoss": "maybe"}, Mode.BATCH, "'failOnDataLoss' must be"),
        ({**BASE, "includeHeaders": "1"}, Mode.BATCH, "'includeHeaders' must be"),
        ({**BASE, "startingTimestamp": "-5"}, Mode.BATCH, "'startingTimestamp' must be >= 0"),
        (
            {**BASE, "startingOffsetsByTimestamp": '{"t": {"0": -1}}'},
            Mode.BATCH,
            "'startingOffsetsByTimestamp': t-0",
        ),
        (
            {**BASE, "startingOffsetsByTimestampStrategy": "first"},
            Mode.BATCH,
            "'startingOffsetsByTimestampStrategy'",
        ),
        ({**BASE, "startingOfsets": "earliest"}, Mode.BATCH, "unknown option 'startingofsets'"),
        ({**BASE, "kafka.group.id": "g"}, Mode.BATCH, "'kafka.group.id' is not supported"),
        ({**BASE, "kafka.fetch.max.wait.ms": "x"}, Mode.BATCH, "fetch.max.wait.ms"),
        ({**BASE, "kafka.no.such.setting": "1"}, Mode.BATCH, "no.such.setting"),
        ({**BASE, "pollTimeoutMs": "0"}, Mode.BATCH, "'pollTimeoutMs' must be >= 1"),
    ],
)
def test_bad_options_fail_naming_the_option(
    options: dict[str, str], mode: Mode, named: str
) -> None:
    with pytest.raises(SourceOptionError) as caught:
        parse_options(options, mode)
    assert named in str(caught.value)
