"""`replog consume`: print records, like kafka-console-consumer.sh.

    replog consume (--topic T | --include REGEX) [--partition P] [--offset earliest|latest|N]
        [--from-beginning] [--group G] [--max-messages N] [--timeout-ms MS]
        [--print-timestamp] [--print-partition] [--print-offset] [--print-headers]
        [--print-key] [--key-separator SEP] [--property NAME=VALUE ...]
        [--consumer-property K=V ...] [--consumer.config FILE]

Rules:
- Each record is printed on stdout as Kafka's default formatter prints it: the value, preceded
  by the fields asked for in Kafka's fixed order (timestamp, partition, offset, headers, key),
  separated by `--key-separator` (default TAB). `--print-X` is `--property print.X=true`.
  Printing offsets prints partitions too (`Partition:0<TAB>Offset:0`: every partition has an
  offset 0), unless `--property print.partition=false`.
- What is read: `--topic T` every partition of T (a topic the cluster does not have is a
  one-line error at the start: replog creates no topic on a read); `--include REGEX` every
  non-internal topic whose whole name matches REGEX when the command starts (no topic matching
  is an error: replog's consumer has no pattern subscription that would wait for one);
  `--partition P` (needs `--topic`) that partition only, from `--offset` (earliest, latest or
  an offset; default latest) or the beginning with `--from-beginning` (a partition T does not
  have is a one-line error at the start too: nothing would ever arrive from it).
- Where it starts without `--partition`: the group's committed offset when `--group` is given
  and one exists, else the beginning with `--from-beginning`, else the end (new records only).
  `--offset` needs `--partition`, and cannot be combined with `--from-beginning` (Kafka's rules;
  usage errors, exit 2).
- Groups: with `--group G` (or `group.id` in the consumer configs) and without `--partition` the
  command joins the group and reads the partitions it assigns (several split a topic).
- Commits: without a group nothing is committed. With `--group G` (or `group.id` in the consumer
  configs) the offsets after the records printed are committed (at most once a second while it
  runs, and when it stops, Ctrl-C included), never a record that was not printed.
- It stops after `--max-messages` records, or when no record arrived for `--timeout-ms`, or on
  Ctrl-C; then `Processed a total of N messages` goes to stderr (as Kafka's does) and the exit
  code is 0 (130 for Ctrl-C). A closed stdout (`| head`) ends it like max-messages.
- Config: `client.id=console-consumer` < `--consumer.config` < `--consumer-property` < what the
  flags set (`group.id`, `auto.offset.reset`, `enable.auto.commit=false`).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import suppress
from typing import Any, Protocol

from replog.cli.arguments import add_documented_command, at_least, parse_key_values
from replog.cli.client_connection import (
    add_client_connection_arguments,
    client_config,
    keys_named,
)
from replog.cli.record_formatter import FormatterConfig, format_record
from replog.client.records import ConsumerRecord, OffsetAndMetadata, TopicPartition
from replog.errors import ReplogError
from replog.record.varint import INT64_MAX

POLL_MS = 200  # one poll; bounds how late max-messages, timeouts and Ctrl-C are noticed
COMMIT_INTERVAL_S = 1.0
MAX_RECORDS_PER_POLL = 500
EARLIEST = "earliest"
LATEST = "latest"


class Output(Protocol):
    """Where records are printed: stdout's binary buffer."""

    def write(self, data: bytes, /) -> int: ...
    def flush(self) -> None: ...


class LineConsumer(Protocol):
    def assign(self, partitions: Sequence[TopicPartition]) -> None: ...
    def subscribe(self, topics: Sequence[str]) -> None: ...
    def seek(self, partition: TopicPartition, offset: int) -> None: ...
    def seek_to_beginning(self, *partitions: TopicPartition) -> None: ...
    def seek_to_end(self, *partitions: TopicPartition) -> None: ...
    def poll(
        self, timeout_ms: int = 0, max_records: int | None = None
    ) -> Mapping[TopicPartition, Sequence[ConsumerRecord]]: ...
    def commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None
    ) -> None: ...
    def close(self, autocommit: bool = True) -> None: ...


def new_consumer(config: dict[str, object]) -> LineConsumer:
    from replog.client.sync_consumer import Consumer

    consumer: LineConsumer = Consumer(config=config)
    return consumer


def cluster_topics(
    config: Mapping[str, object], *, include_internal: bool = False, timeout_ms: int | None = None
) -> dict[str, int]:
    """The cluster's topics (internal ones only with `include_internal`) and their partition
    counts, through the admin client; an unreachable cluster is its one-line error, within
    `timeout_ms` when given (the admin's default, 60 s, otherwise)."""
    from replog.client.sync_admin import Admin
    from replog.client.tls_settings import SECURITY_KEYS

    # The config may spell the key either way (`client_config` keeps the user's spelling).
    servers = config[keys_named(config, "bootstrap.servers")[-1]]
    admin_config: dict[str, object] = {"bootstrap.servers": servers}
    # How long a refusing bootstrap address is retried: the consumer's setting goes along.
    refused = keys_named(config, "socket.connection.setup.timeout.max.ms")
    if refused:
        admin_config["socket.connection.setup.timeout.max.ms"] = config[refused[-1]]
    # It connects as the command's client does: its security settings go along too.
    admin_config.update({k: v for k, v in config.items() if k.strip() in SECURITY_KEYS})
    with Admin(admin_config) as admin:
        described = admin.describe_topics(include_internal=include_internal, timeout_ms=timeout_ms)
    return {name: len(topic.partitions) for name, topic in described.items()}


def existing_topic(topic: str, topics: Mapping[str, int], partition: int | None = None) -> None:
    """`topic` (and its `partition`, when given), if the cluster has it: replog creates no topic
    on a read, so waiting for one would only end in the timeout (Kafka's consumer may wait for
    auto-creation), or never for a partition past the topic's last, which no timeout ends."""
    if topic not in topics:
        known = ", ".join(t for t in sorted(topics) if not t.startswith("__")) or "none"
        raise ReplogError(f"--topic {topic!r}: no such topic (topics: {known})")
    if partition is not None and partition >= topics[topic]:
        raise ReplogError(
            f"partition {topic}-{partition} does not exist: topic {topic!r} has "
            f"{topics[topic]} partitions"
        )


# --- arguments -----------------------------------------------------------------------------------


def formatter_config(args: argparse.Namespace) -> FormatterConfig:
    properties = parse_key_values(args.property, "--property", strip_values=False)
    for field in ("timestamp", "partition", "offset", "headers", "key"):
        if getattr(args, f"print_{field}"):
            properties[f"print.{field}"] = "true"
    if args.key_separator is not None:
        properties["key.separator"] = args.key_separator
    return FormatterConfig.from_properties(properties)


def usage_problem(args: argparse.Namespace) -> str | None:
    """Kafka's combinations that make no sense (usage errors)."""
    if args.partition is not None and args.topic is None:
        return "--partition needs --topic"
    if args.offset is not None and args.partition is None:
        return "--offset needs --partition"
    if args.offset is not None and args.from_beginning:
        return "--offset and --from-beginning cannot be used together"
    return None


def offset_value(text: str) -> str | int:
    if text in (EARLIEST, LATEST):
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected earliest, latest or an offset (a whole number >= 0)"
        ) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: an offset must be >= 0")
    if value > INT64_MAX:
        raise argparse.ArgumentTypeError(f"{text!r}: an offset must be at most {INT64_MAX}")
    return value


def consumer_config(args: argparse.Namespace) -> dict[str, object]:
    """The consumer's config. `auto.offset.reset` as kafka-console-consumer.sh sets it:
    earliest with `--from-beginning` (a user value saying otherwise is refused), else the
    user's value, else latest; an invalid value is the consumer's ConfigError."""
    forced: dict[str, object] = {
        "enable.auto.commit": "false",  # commits are explicit: only what was printed
    }
    if args.group is not None:
        forced["group.id"] = args.group
    config = client_config(
        args,
        kind="consumer",
        file_option="consumer.config",
        props_option="consumer_property",
        defaults={"client.id": "console-consumer"},
        forced=forced,
    )
    keys = keys_named(config, "auto.offset.reset")
    given = [str(config[k]) for k in keys]
    if args.from_beginning:
        refused = [value for value in given if value != EARLIEST]
        if refused:
            raise ReplogError(
                f"--from-beginning and auto.offset.reset={refused[0]} cannot be used together"
            )
        for key in keys:
            del config[key]
        config["auto.offset.reset"] = EARLIEST
    elif not keys:
        config["auto.offset.reset"] = LATEST
    return config


def matching_topics(pattern: str, topics: Collection[str]) -> list[str]:
    try:
        compiled = re.compile(pattern)
    except re.error as error:
        raise ReplogError(f"--include {pattern!r}: not a regular expression: {error}") from None
    matched = sorted(t for t in topics if compiled.fullmatch(t))
    if not matched:
        known = ", ".join(sorted(topics)) or "none"
        raise ReplogError(f"--include {pattern!r}: no topic matches (topics: {known})")
    return matched


# --- reading -------------------------------------------------------------------------------------


def start(consumer: LineConsumer, args: argparse.Namespace, included: Sequence[str]) -> None:
    """Assign or subscribe (to `included`, the topics `--include` matched), and seek, as the
    arguments say."""
    if args.partition is not None:
        tp = TopicPartition(args.topic, args.partition)
        consumer.assign([tp])
        offset = args.offset if args.offset is not None else LATEST
        if args.from_beginning or offset == EARLIEST:
            consumer.seek_to_beginning(tp)
        elif offset == LATEST:
            consumer.seek_to_end(tp)
        else:
            consumer.seek(tp, int(offset))
        return
    if args.include is not None:
        consumer.subscribe(included)
    else:
        consumer.subscribe([args.topic])


class Printer:
    """Writes formatted records to a binary stream and remembers what to commit."""

    def __init__(self, out: Output, formatter: FormatterConfig) -> None:
        self._out = out
        self._formatter = formatter
        self.count = 0
        self.to_commit: dict[TopicPartition, int] = {}

    def print_batch(self, records: Sequence[ConsumerRecord]) -> None:
        chunks = []
        for record in records:
            chunks.append(
                format_record(
                    self._formatter,
                    partition=record.partition,
                    offset=record.offset,
                    timestamp=record.timestamp,
                    timestamp_type=record.timestamp_type,
                    headers=record.headers,
                    key=record.key,
                    value=record.value,
                )
            )
        # Counted before the write: a Ctrl-C that arrives as the write returns must not lose
        # records that reached stdout. A write that fails (a closed pipe) takes them back, so
        # nothing unprinted is committed.
        count, to_commit = self.count, dict(self.to_commit)
        self.count += len(records)
        for record in records:
            self.to_commit[TopicPartition(record.topic, record.partition)] = record.offset + 1
        try:
            self._out.write(b"".join(chunks))
            self._out.flush()  # a pipe reader sees each batch at once
        except OSError:
            self.count, self.to_commit = count, to_commit
            raise


def consume(
    consumer: LineConsumer,
    printer: Printer,
    *,
    max_messages: int | None,
    timeout_ms: int | None,
    commit: Callable[[], None] | None,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Poll and print until max-messages, the timeout, or a closed stdout."""
    last_record = last_commit = clock()
    while max_messages is None or printer.count < max_messages:
        wait_ms = POLL_MS
        if timeout_ms is not None:
            left_ms = timeout_ms - (clock() - last_record) * 1000
            if left_ms <= 0:
                return
            wait_ms = max(1, min(wait_ms, int(left_ms)))
        limit = MAX_RECORDS_PER_POLL
        if max_messages is not None:
            limit = min(limit, max_messages - printer.count)
        polled = consumer.poll(timeout_ms=wait_ms, max_records=limit)
        for records in polled.values():
            if records:
                printer.print_batch(records)
                last_record = clock()
        if commit is not None and clock() - last_commit >= COMMIT_INTERVAL_S:
            commit()
            last_commit = clock()


def run(args: argparse.Namespace) -> int:
    problem = usage_problem(args)
    if problem is not None:
        args.usage_error(problem)
    formatter = formatter_config(args)
    config = consumer_config(args)
    # Before the consumer exists: a mistake here is one line, without a summary.
    # `--timeout-ms` bounds this wait too: Kafka's console consumer gives up after it whether
    # or not the cluster answers (a stopped cluster would otherwise take the admin's 60 s).
    topics = cluster_topics(
        config, include_internal=args.include is None, timeout_ms=args.timeout_ms
    )
    if args.include is None:
        existing_topic(args.topic, topics, args.partition)
    included = [] if args.include is None else matching_topics(args.include, topics)
    consumer = new_consumer(config)
    printer = Printer(_binary_stdout(), formatter)
    group = config.get("group.id")
    committed: dict[TopicPartition, int] = {}

    def commit() -> None:
        due = {tp: o for tp, o in printer.to_commit.items() if committed.get(tp) != o}
        if due:
            consumer.commit({tp: OffsetAndMetadata(o) for tp, o in due.items()})
            committed.update(due)

    interrupted = False
    try:
        start(consumer, args, included)
        consume(
            consumer,
            printer,
            max_messages=args.max_messages,
            timeout_ms=args.timeout_ms,
            commit=commit if group else None,
        )
    except KeyboardInterrupt:
        interrupted = True
    except BrokenPipeError:
        # The reader went away (`| head`): stop as after max-messages; later writes to the
        # closed pipe (the interpreter's final flush) would fail again.
        with suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    finally:
        try:
            if group and interrupted:
                with suppress(ReplogError):  # best effort, as Kafka's close on Ctrl-C
                    commit()
            elif group:
                commit()
        finally:
            with suppress(ReplogError):
                consumer.close(autocommit=False)
            print(f"Processed a total of {printer.count} messages", file=sys.stderr, flush=True)
    if interrupted:
        raise KeyboardInterrupt
    return 0


def _binary_stdout() -> Output:
    buffer: Output | None = getattr(sys.stdout, "buffer", None)
    if buffer is not None:
        return buffer
    return _TextAdapter(sys.stdout)


class _TextAdapter:
    """A text stream (a test's StringIO) behind the binary interface the printer writes to."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, data: bytes) -> int:
        self._stream.write(data.decode("utf-8", errors="replace"))
        return len(data)

    def flush(self) -> None:
        self._stream.flush()


def register(commands: Any) -> None:
    parser = add_documented_command(
        commands,
        "consume",
        __doc__,
    )
    parser.set_defaults(run=run, usage_error=parser.error)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--topic", metavar="TOPIC", help="the topic to read")
    source.add_argument(
        "--include", metavar="REGEX", help="read every topic whose whole name matches REGEX"
    )
    parser.add_argument(
        "--partition", type=at_least(0), metavar="P", help="read this partition only"
    )
    parser.add_argument(
        "--offset",
        type=offset_value,
        metavar="earliest|latest|N",
        help="where --partition starts (default: latest)",
    )
    parser.add_argument(
        "--from-beginning",
        action="store_true",
        help="without a committed offset, start at the beginning (default: at the end)",
    )
    parser.add_argument("--group", metavar="GROUP", help="commit what is printed for GROUP")
    parser.add_argument(
        "--max-messages", type=at_least(1), metavar="N", help="stop after N records"
    )
    parser.add_argument(
        "--timeout-ms", type=at_least(1), metavar="MS", help="stop after MS without a record"
    )
    for field in ("timestamp", "partition", "offset", "headers", "key"):
        parser.add_argument(
            f"--print-{field}", action="store_true", help=f"print the record's {field}"
        )
    parser.add_argument(
        "--key-separator", metavar="SEP", help="what separates the printed fields (default: TAB)"
    )
    parser.add_argument(
        "--property",
        action="extend",
        nargs="+",
        metavar="NAME=VALUE",
        help="formatter properties: print.timestamp, print.partition, print.offset, "
        "print.headers, print.key, print.value, key.separator, line.separator, "
        "headers.separator, null.literal",
    )
    parser.add_argument(
        "--consumer-property",
        action="extend",
        nargs="+",
        metavar="KEY=VALUE",
        help="a consumer config (repeatable), over --consumer.config",
    )
    parser.add_argument(
        "--consumer.config",
        dest="consumer.config",
        metavar="FILE",
        help="a properties file of consumer configs",
    )
    add_client_connection_arguments(parser)
