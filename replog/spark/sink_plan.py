"""What `df.write.format("replog")` / `writeStream.format("replog")` will do: the sink's options
and the input schema, checked once at planning (on the driver), pure.

The rules are those of Spark's Kafka sink, so a query writing to `format("kafka")` moves over
by changing the format name:

- Columns (matched without case, as Spark resolves names): `value` (required, binary or
  string; null writes a record with a null value, a tombstone), `key` (binary or string),
  `topic` (string; required unless the `topic` option is given, which then wins over the
  column), `partition` (an integer type; null lets the producer's partitioner choose:
  murmur2 of the key, sticky for null keys) and `headers` (array<struct<key string, value
  binary>>; a string header value is written as its UTF-8 bytes). Any other column is
  ignored, as Kafka's sink ignores it, so a DataFrame read from replog (offset, timestamp, ...)
  can be written back as it is. Strings are written as UTF-8.
- Options: `bootstrap.servers` (or `kafka.bootstrap.servers`, required), `topic`, and
  `kafka.<producer setting>` passed to the tasks' producers (`kafka.linger.ms`,
  `kafka.batch.size`, `kafka.compression.type`, ...), checked like any producer config.
  `kafka.acks` other than all/-1, `kafka.enable.idempotence=false`, serializers and
  `kafka.transactional.id` are refused: the sink always produces with acks=all and
  idempotence. `checkpointLocation` (which Spark passes to a streaming sink) is accepted and
  left to Spark. Anything else (a read option such as `subscribe`, a typo) is an error.
- Save modes: batch writes append (`mode("append")`); `overwrite` is refused, a topic cannot
  be truncated by a write. A streaming query may use any output mode: each micro-batch's rows
  are appended (in `complete` mode the whole result, every batch), as Kafka's sink does.

Rules:
- Every option and schema problem is raised here, at planning, never in a task:
  `SinkOptionError` names the option (in its documented spelling) and the value, and lists the
  known options; `SinkSchemaError` names the column, its type and what is accepted, and lists
  every column given, so the message alone says what to fix. The one exception is a null
  `topic` value, which only a task can see (`SinkRecordError`).
- A `SinkPlan` is small, frozen and picklable: it travels to every task inside the writer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    ByteType,
    DataType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

from replog.client.config import producer_config
from replog.errors import ConfigError, ReplogError
from replog.spark.options import required_bootstrap_servers

__all__ = [
    "SINK_PRODUCER_DEFAULTS",
    "SinkOptionError",
    "SinkPlan",
    "SinkRecordError",
    "SinkSchemaError",
    "plan_sink",
]


class SinkOptionError(ConfigError):
    """A write option that is unknown, missing, refused or malformed (module docstring)."""


class SinkSchemaError(ReplogError):
    """The DataFrame written has a missing or mistyped column (module docstring)."""


class SinkRecordError(ReplogError):
    """A row that cannot become a record (a null topic without the `topic` option); raised in
    the task, naming the column and the row's position in the task's input."""


# Documented spelling of every sink option, by its lower-cased key (Spark lower-cases them).
KNOWN = {
    name.lower(): name
    for name in ("bootstrap.servers", "kafka.bootstrap.servers", "topic", "checkpointLocation")
}
# Settings the sink decides itself: each would weaken the delivery guarantee or the bytes sent.
REFUSED_PASSTHROUGH = {
    "key.serializer": "keys are written as given (binary, or string as UTF-8)",
    "value.serializer": "values are written as given (binary, or string as UTF-8)",
    "transactional.id": "replog has no transactions",
}
FORCED_PASSTHROUGH = {
    "acks": ("all", "-1"),
    "enable.idempotence": ("true",),
}
# The sink's producer defaults where they differ from the client's: a task sends many records
# at once, so a little more linger fills the client's (1 MB) batches and cuts requests.
# `kafka.<setting>` overrides them.
SINK_PRODUCER_DEFAULTS = {"linger.ms": "20"}

_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)


@dataclass(frozen=True)
class SinkPlan:
    """Checked options and where each record field comes from (column index or None)."""

    producer_settings: Mapping[str, str]
    topic: str | None  # the `topic` option; wins over the column
    value_index: int
    value_is_string: bool
    key_index: int | None = None
    key_is_string: bool = False
    topic_index: int | None = None
    partition_index: int | None = None
    headers_index: int | None = None
    header_value_is_string: bool = False
    columns: tuple[str, ...] = field(default=())  # every input column, for messages

    @property
    def description(self) -> str:
        where = f"topic {self.topic!r}" if self.topic is not None else "the topic column"
        return f"replog sink to {where} at {self.producer_settings['bootstrap.servers']}"


def plan_sink(
    options: Mapping[str, str], schema: StructType, *, overwrite: bool, streaming: bool
) -> SinkPlan:
    """The checked plan of one write (module docstring); raises SinkOptionError or
    SinkSchemaError naming what is wrong."""
    given = {str(k).lower(): str(v) for k, v in options.items()}
    if overwrite and not streaming:
        raise SinkOptionError(
            "save mode 'overwrite' is not supported by format 'replog': a topic is append-only; "
            "use mode('append')"
        )
    settings = _producer_settings(given)
    topic = given.get("topic")
    if topic is not None:
        topic = topic.strip()
        if not topic:
            raise SinkOptionError("option 'topic' must not be empty")
    return _columns(schema, settings, topic)


def _producer_settings(given: Mapping[str, str]) -> dict[str, str]:
    for key in given:
        if key not in KNOWN and not key.startswith("kafka."):
            hint = ""
            if key in _READ_OPTIONS:
                hint = f" ({_READ_OPTIONS[key]!r} is a read option)"
            elif key == "path":
                hint = " (name the topic with option('topic', ...), not save(path))"
            raise SinkOptionError(
                f"unknown option {key!r} for writing to format 'replog'{hint}; known options: "
                + ", ".join(sorted(KNOWN.values()))
                + ", and kafka.<producer setting>"
            )
    servers = required_bootstrap_servers(given, SinkOptionError)
    settings = dict(SINK_PRODUCER_DEFAULTS)
    for key, value in given.items():
        if not key.startswith("kafka.") or key == "kafka.bootstrap.servers":
            continue
        setting = key.removeprefix("kafka.")
        if setting in REFUSED_PASSTHROUGH:
            raise SinkOptionError(
                f"option 'kafka.{setting}' is not supported: {REFUSED_PASSTHROUGH[setting]}"
            )
        allowed = FORCED_PASSTHROUGH.get(setting)
        if allowed is not None and value.strip().lower() not in allowed:
            raise SinkOptionError(
                f"option 'kafka.{setting}={value}' is not supported: the sink always produces "
                f"with acks=all and enable.idempotence=true"
            )
        settings[setting] = value
    settings.update({"bootstrap.servers": servers, "acks": "all"})
    settings["enable.idempotence"] = "true"
    try:
        producer_config(settings)
    except ConfigError as exc:
        # The client's message names the setting without our prefix: name the option as given.
        named = [
            k for k in given if k.startswith("kafka.") and k.removeprefix("kafka.") in str(exc)
        ]
        option = f"option {named[0]!r}" if named else "a kafka.* option"
        raise SinkOptionError(f"{option} is not a valid producer setting: {exc}") from exc
    return settings


# Read options someone may carry over from a reader's option dict, by lower-cased key.
_READ_OPTIONS = {
    name.lower(): name
    for name in (
        "subscribe",
        "subscribePattern",
        "assign",
        "startingOffsets",
        "endingOffsets",
        "startingOffsetsByTimestamp",
        "startingTimestamp",
        "maxOffsetsPerTrigger",
        "minPartitions",
        "failOnDataLoss",
        "includeHeaders",
    )
}


def _columns(schema: StructType, settings: dict[str, str], topic: str | None) -> SinkPlan:
    names = tuple(f.name for f in schema.fields)
    given = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in schema.fields) or "none"
    index: dict[str, int] = {}
    for i, name in enumerate(names):
        lowered = name.lower()
        if lowered in ("value", "key", "topic", "partition", "headers"):
            if lowered in index:
                raise SinkSchemaError(
                    f"the DataFrame has two columns named {lowered!r} (names are matched "
                    f"without case); columns: {given}"
                )
            index[lowered] = i

    def kind(name: str, accepted: str, ok: bool) -> None:
        if not ok:
            data_type = schema.fields[index[name]].dataType
            raise SinkSchemaError(
                f"column {name!r} must be {accepted}, not {data_type.simpleString()}; "
                f"cast it (e.g. col({name!r}).cast('{accepted.split()[0]}')); columns: {given}"
            )

    if "value" not in index:
        raise SinkSchemaError(
            f"writing to format 'replog' needs a 'value' column (binary or string); "
            f"columns: {given}"
        )
    value_type = schema.fields[index["value"]].dataType
    kind("value", "binary or string", _is_bytes_like(value_type))
    key_type: DataType | None = None
    if "key" in index:
        key_type = schema.fields[index["key"]].dataType
        kind("key", "binary or string", _is_bytes_like(key_type))
    if "topic" in index and topic is None:
        kind("topic", "string", isinstance(schema.fields[index["topic"]].dataType, StringType))
    if topic is None and "topic" not in index:
        raise SinkSchemaError(
            "writing to format 'replog' needs the option 'topic' or a string column 'topic'; "
            f"columns: {given}"
        )
    if "partition" in index:
        kind(
            "partition",
            "int (or another integer type)",
            isinstance(schema.fields[index["partition"]].dataType, _INTEGRAL),
        )
    header_value_is_string = False
    if "headers" in index:
        header_value_is_string = _check_headers(schema.fields[index["headers"]].dataType, given)
    return SinkPlan(
        producer_settings=settings,
        topic=topic,
        value_index=index["value"],
        value_is_string=isinstance(value_type, StringType),
        key_index=index.get("key"),
        key_is_string=isinstance(key_type, StringType),
        topic_index=index.get("topic") if topic is None else None,
        partition_index=index.get("partition"),
        headers_index=index.get("headers"),
        header_value_is_string=header_value_is_string,
        columns=names,
    )


def _is_bytes_like(data_type: DataType) -> bool:
    return isinstance(data_type, BinaryType | StringType)


def _check_headers(data_type: DataType, given: str) -> bool:
    """True when header values are strings; raises unless array<struct<key string, value
    binary or string>>."""
    element = data_type.elementType if isinstance(data_type, ArrayType) else None
    if isinstance(element, StructType):
        fields = {f.name.lower(): f.dataType for f in element.fields}
        key, value = fields.get("key"), fields.get("value")
        if (
            len(fields) == 2
            and isinstance(key, StringType)
            and value is not None
            and _is_bytes_like(value)
        ):
            return isinstance(value, StringType)
    raise SinkSchemaError(
        "column 'headers' must be array<struct<key:string,value:binary>>, not "
        f"{data_type.simpleString()}; columns: {given}"
    )
