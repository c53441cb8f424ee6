"""`replog produce`: one record per line of stdin, like kafka-console-producer.sh.

    replog produce --topic T [--key-separator SEP] [--acks 0|1|all|-1] [--header K=V ...]
        [--property NAME=VALUE ...] [--producer-property K=V ...] [--producer.config FILE]
        [--compression-codec none|gzip|snappy|lz4|zstd] [--sync]

Rules:
- Each line is parsed by Kafka's line-reader properties (`--property NAME=VALUE`: parse.key,
  key.separator, parse.headers, headers.delimiter, headers.separator, headers.key.separator,
  null.marker, ignore.error). `--key-separator SEP` is
  `parse.key=true key.separator=SEP`. `--header K=V` adds a header to every record, before the
  headers a line carries.
- Sends go through the blocking `replog.Producer` (acks=all and idempotence unless configured
  otherwise). Config: `client.id=console-producer` < `--producer.config` <
  `--producer-property` < `--acks` and `--compression-codec` (explicit flags win, as in Kafka).
  `--sync` waits for each record before reading the next line.
- At EOF it waits for every send (flush) and prints nothing when all succeeded (exit 0).
  While it waits, the client's WARNINGs go to stderr (`replog.cli.main` sets up logging): a
  bootstrap address refusing connections, a produce error being retried, and for a wait past
  5 s, every 10 s, what it waits for (a leader, an answer, metadata) and until when.
- A send that fails (the broker's error, or no metadata for the topic within max.block.ms)
  makes one stderr line naming the topic, how many records failed and the first error, and exit
  code 1; reading stops at the first failure. With `--property ignore.error=true` the line is
  still printed, the remaining lines are still sent, and the exit code is 0. A line that cannot
  be parsed (no key separator ...) stops reading the same way unless ignore.error is set.
- Ctrl-C: what was sent is not waited for; exit code 130.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from typing import Any, BinaryIO, Protocol

from replog.cli.arguments import add_documented_command, parse_key_values
from replog.cli.client_connection import add_client_connection_arguments, client_config
from replog.cli.line_reader import LineReaderConfig, parse_line, strip_newline
from replog.errors import ReplogError

ACKS = ("0", "1", "all", "-1")
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


class Future(Protocol):
    def add_errback(self, fn: Callable[[BaseException], object]) -> object: ...
    def get(self, timeout: float | None = None) -> object: ...


class LineProducer(Protocol):
    def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        headers: Iterable[tuple[str, bytes | None]] | None = None,
    ) -> Future: ...
    def flush(self, timeout: float | None = None) -> None: ...
    def close(self, timeout: float | None = None) -> None: ...


def new_producer(config: dict[str, object]) -> LineProducer:
    from replog.client.sync_producer import Producer

    producer: LineProducer = Producer(config)
    return producer


class Failures:
    """Failed sends (thread-safe: errbacks run on the producer's loop thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0
        self.first: str | None = None

    def add(self, error: BaseException) -> None:
        with self._lock:
            self.count += 1
            if self.first is None:
                self.first = f"{type(error).__name__}: {error}"


def reader_config(args: argparse.Namespace) -> LineReaderConfig:
    properties = parse_key_values(args.property, "--property", strip_values=False)
    if args.key_separator is not None:
        properties["parse.key"] = "true"
        properties["key.separator"] = args.key_separator
    return LineReaderConfig.from_properties(properties)


def static_headers(items: Sequence[str] | None) -> tuple[tuple[str, bytes | None], ...]:
    headers: list[tuple[str, bytes | None]] = []
    for item in items or ():
        key, equals, value = item.partition("=")
        if not equals or not key:
            raise ReplogError(f"--header {item!r}: expected KEY=VALUE")
        headers.append((key, value.encode()))
    return tuple(headers)


def producer_config(args: argparse.Namespace) -> dict[str, object]:
    forced: dict[str, object] = {}
    if args.acks is not None:
        forced["acks"] = args.acks
    if args.compression_codec is not None:
        forced["compression.type"] = args.compression_codec
    return client_config(
        args,
        kind="producer",
        file_option="producer.config",
        props_option="producer_property",
        defaults={"client.id": "console-producer"},
        forced=forced,
    )


def produce_lines(
    producer: LineProducer,
    topic: str,
    lines: Iterable[bytes],
    reader: LineReaderConfig,
    headers: tuple[tuple[str, bytes | None], ...],
    *,
    sync: bool,
    failures: Failures,
) -> int:
    """Send one record per line until the lines end or (without ignore.error) one fails;
    returns the number of records handed to the producer."""
    sent = 0
    for number, raw in enumerate(lines, start=1):
        if failures.count and not reader.ignore_error:
            break
        try:
            record = parse_line(strip_newline(raw), number, reader)
        except ReplogError as error:
            if reader.ignore_error:  # (only header-key errors get here with ignore.error)
                failures.add(error)
                continue
            raise
        try:
            future = producer.send(
                topic, value=record.value, key=record.key, headers=headers + record.headers
            )
        except ReplogError as error:  # no metadata within max.block.ms, a record too large ...
            failures.add(error)
            continue
        sent += 1
        if sync:
            try:
                future.get()
            except ReplogError as error:
                failures.add(error)
        else:
            future.add_errback(failures.add)
    return sent


def run(args: argparse.Namespace) -> int:
    reader = reader_config(args)
    headers = static_headers(args.header)
    producer = new_producer(producer_config(args))
    failures = Failures()
    stdin: BinaryIO = sys.stdin.buffer
    interrupted = False
    try:
        produce_lines(
            producer, args.topic, stdin, reader, headers, sync=args.sync, failures=failures
        )
        producer.flush()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        with suppress(ReplogError):
            producer.close(timeout=0 if interrupted else None)
    if interrupted:
        raise KeyboardInterrupt
    if failures.count:
        print(
            f"replog produce: {failures.count} record(s) to topic {args.topic} failed; "
            f"first: {failures.first}",
            file=sys.stderr,
        )
        return 0 if reader.ignore_error else 1
    return 0


def register(commands: Any) -> None:
    parser = add_documented_command(
        commands,
        "produce",
        __doc__,
    )
    parser.set_defaults(run=run)
    parser.add_argument("--topic", required=True, metavar="TOPIC", help="the topic to send to")
    parser.add_argument(
        "--key-separator",
        metavar="SEP",
        help="each line is KEY<SEP>VALUE (sets parse.key=true and key.separator=SEP)",
    )
    parser.add_argument(
        "--acks", choices=ACKS, help="acks for every record (default: the producer's, all)"
    )
    parser.add_argument(
        "--header",
        action="extend",
        nargs="+",
        metavar="KEY=VALUE",
        help="a header added to every record (repeatable)",
    )
    parser.add_argument(
        "--property",
        action="extend",
        nargs="+",
        metavar="NAME=VALUE",
        help="line reader properties: parse.key, key.separator, parse.headers, "
        "headers.delimiter, headers.separator, headers.key.separator, null.marker, ignore.error",
    )
    parser.add_argument(
        "--producer-property",
        action="extend",
        nargs="+",
        metavar="KEY=VALUE",
        help="a producer config (repeatable), over --producer.config",
    )
    parser.add_argument(
        "--producer.config",
        dest="producer.config",
        metavar="FILE",
        help="a properties file of producer configs",
    )
    parser.add_argument(
        "--compression-codec", choices=CODECS, help="compression.type of the producer"
    )
    parser.add_argument(
        "--sync", action="store_true", help="wait for each record before reading the next line"
    )
    add_client_connection_arguments(parser)
