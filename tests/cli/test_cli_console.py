"""`replog produce` and `replog consume`: the pure line reader and formatter (Kafka's rules, line
by line), then both commands as real subprocesses against one real 3-node cluster per module:
what a line becomes (key, headers, null marker), what consume prints in Kafka's field order,
groups committing exactly what was printed, partition/offset reads, --include, timeouts, the
summary line, and every user mistake as one stderr line with a non-zero exit code."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from cli_runner import Outcome, replog, replog_process
from client_cluster import NO_GROUP_DELAY, ClientCluster, client_cluster

from replog import Admin
from replog.cli import console_consumer
from replog.cli.line_reader import LineReaderConfig, LineRecord, parse_line
from replog.cli.record_formatter import FormatterConfig, format_record
from replog.client.records import (
    TIMESTAMP_TYPE_LOG_APPEND_TIME,
    ConsumerRecord,
    TopicPartition,
)
from replog.errors import ReplogError
from tests.local_ports import free_port

# --- the line reader (pure) ----------------------------------------------------------------------


def reader(**properties: str) -> LineReaderConfig:
    return LineReaderConfig.from_properties({k.replace("_", "."): v for k, v in properties.items()})


def test_a_line_is_the_value_by_default() -> None:
    assert parse_line(b"a\tb:c", 1, reader()) == LineRecord((), None, b"a\tb:c")
    assert parse_line(b"", 1, reader()) == LineRecord((), None, b"")


def test_keys_split_at_the_first_separator() -> None:
    config = reader(parse_key="true", key_separator=":")
    assert parse_line(b"k:v:w", 1, config) == LineRecord((), b"k", b"v:w")
    assert parse_line(b":v", 1, config) == LineRecord((), b"", b"v")
    with pytest.raises(ReplogError, match=r"No key separator found on line number 7: 'kv'"):
        parse_line(b"kv", 7, config)
    lenient = reader(parse_key="true", key_separator=":", ignore_error="true")
    assert parse_line(b"kv", 7, lenient) == LineRecord((), None, b"kv")


def test_headers_come_first_then_key_then_value() -> None:
    config = reader(parse_headers="true", parse_key="true", null_marker="NULL")
    assert parse_line(b"h1:v1,h2,h3:NULL\tk\tv", 1, config) == LineRecord(
        (("h1", b"v1"), ("h2", None), ("h3", None)), b"k", b"v"
    )
    assert parse_line(b"\tNULL\tNULL", 1, config) == LineRecord((), None, None)
    custom = reader(
        parse_headers="true", headers_delimiter="|", headers_separator=";",
        headers_key_separator="=",
    )  # fmt: skip
    assert parse_line(b"a=1;b=2|x", 1, custom) == LineRecord((("a", b"1"), ("b", b"2")), None, b"x")
    with pytest.raises(ReplogError, match="No headers delimiter found on line number 2"):
        parse_line(b"no delimiter", 2, custom)
    with pytest.raises(ReplogError, match="Header keys should not be equal to the null marker"):
        parse_line(b"NULL:v\tk\tv", 1, config)


def test_reader_properties_are_checked() -> None:
    unknown = "--property parse.kee: unknown; known: parse.key"
    with pytest.raises(ReplogError, match=re.escape(unknown)):
        LineReaderConfig.from_properties({"parse.kee": "true"})
    with pytest.raises(ReplogError, match=re.escape("parse.key=yes: must be true or false")):
        LineReaderConfig.from_properties({"parse.key": "yes"})
    equal = "null.marker and key.separator may not be equal"
    with pytest.raises(ReplogError, match=re.escape(equal)):
        LineReaderConfig.from_properties({"null.marker": ":", "key.separator": ":"})
    with pytest.raises(ReplogError, match=re.escape("headers.separator and headers.key.separator")):
        LineReaderConfig.from_properties({"headers.separator": ":"})
    with pytest.raises(ReplogError, match=re.escape("key.separator: may not be empty")):
        LineReaderConfig.from_properties({"key.separator": ""})


# --- the formatter (pure) ------------------------------------------------------------------------


def formatted(config: FormatterConfig, **record: object) -> bytes:
    fields: dict[str, object] = {
        "partition": 2, "offset": 41, "timestamp": 1700000000123, "timestamp_type": 0,
        "headers": (("h", b"1"), ("n", None)), "key": b"k", "value": b"v",
    }  # fmt: skip
    fields.update(record)
    return format_record(config, **fields)  # type: ignore[arg-type]


def test_the_value_alone_by_default() -> None:
    assert formatted(FormatterConfig()) == b"v\n"
    assert formatted(FormatterConfig(), value=None) == b"null\n"


def test_every_field_in_kafkas_order() -> None:
    config = FormatterConfig.from_properties(
        {f"print.{f}": "true" for f in ("key", "headers", "offset", "partition", "timestamp")}
    )
    assert (
        formatted(config) == b"CreateTime:1700000000123\tPartition:2\tOffset:41\th:1,n:null\tk\tv\n"
    )
    assert formatted(
        config, headers=(), key=None, timestamp_type=TIMESTAMP_TYPE_LOG_APPEND_TIME
    ) == (b"LogAppendTime:1700000000123\tPartition:2\tOffset:41\tNO_HEADERS\tnull\tv\n")
    assert formatted(config, timestamp=-1).startswith(b"NO_TIMESTAMP\t")


def test_an_offset_is_printed_with_its_partition_unless_that_is_turned_off() -> None:
    """Two partitions' records at offset 0 must not print as two identical `Offset:0` lines."""
    offset = FormatterConfig.from_properties({"print.offset": "true"})
    assert formatted(offset) == b"Partition:2\tOffset:41\tv\n"
    alone = FormatterConfig.from_properties({"print.offset": "true", "print.partition": "false"})
    assert formatted(alone) == b"Offset:41\tv\n"
    assert formatted(FormatterConfig.from_properties({"print.partition": "true"})) == (
        b"Partition:2\tv\n"
    )


def test_separators_null_literal_and_no_value() -> None:
    config = FormatterConfig.from_properties(
        {
            "print.key": "true", "print.value": "false", "key.separator": " | ",
            "line.separator": ";", "null.literal": "-", "print.offset": "true",
        }
    )  # fmt: skip
    assert formatted(config) == b"Partition:2 | Offset:41 | k;"
    assert formatted(config, key=None) == b"Partition:2 | Offset:41 | -;"
    assert formatted(FormatterConfig(print_value=False)) == b""
    with pytest.raises(ReplogError, match=re.escape("--property print.keys: unknown")):
        FormatterConfig.from_properties({"print.keys": "true"})


# --- the consume loop, against a fake consumer -------------------------------------------------


def record(partition: int, offset: int, value: bytes) -> ConsumerRecord:
    return ConsumerRecord("t", partition, offset, 1700000000000, 0, None, value, ())


class FakeConsumer:
    """Hands out `batches` (one per poll), then nothing; records what it was asked."""

    def __init__(self, batches: list[list[ConsumerRecord]]) -> None:
        self.batches = batches
        self.asked: list[int | None] = []

    def poll(
        self, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        self.asked.append(max_records)
        if not self.batches:
            time.sleep(timeout_ms / 1000)
            return {}
        batch = self.batches.pop(0)[: max_records or None]
        return {TopicPartition("t", batch[0].partition): batch}


class ClosedPipe(io.BytesIO):
    def write(self, data: bytes, /) -> int:  # type: ignore[override]
        raise BrokenPipeError(32, "Broken pipe")


def test_max_messages_never_asks_for_more_and_commits_what_was_printed() -> None:
    fake = FakeConsumer([[record(0, o, b"v%d" % o) for o in range(3)], [record(1, 7, b"w")]])
    out = io.BytesIO()
    printer = console_consumer.Printer(out, FormatterConfig())
    console_consumer.consume(fake, printer, max_messages=4, timeout_ms=None, commit=None)  # type: ignore[arg-type]
    assert out.getvalue() == b"v0\nv1\nv2\nw\n"
    assert fake.asked == [4, 1]
    assert printer.count == 4
    assert printer.to_commit == {TopicPartition("t", 0): 3, TopicPartition("t", 1): 8}


def test_the_timeout_counts_from_the_last_record() -> None:
    fake = FakeConsumer([[record(0, 0, b"x")]])
    printer = console_consumer.Printer(io.BytesIO(), FormatterConfig())
    started = time.monotonic()
    console_consumer.consume(fake, printer, max_messages=None, timeout_ms=300, commit=None)  # type: ignore[arg-type]
    assert 0.3 <= time.monotonic() - started < 3
    assert printer.count == 1


def test_a_closed_pipe_takes_back_what_it_did_not_print() -> None:
    printer = console_consumer.Printer(ClosedPipe(), FormatterConfig())
    with pytest.raises(BrokenPipeError):
        printer.print_batch([record(0, 5, b"x")])
    assert (printer.count, printer.to_commit) == (0, {})


# --- against a real cluster ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientCluster]:
    with client_cluster(tmp_path_factory.mktemp("console"), 3, *NO_GROUP_DELAY) as started:
        started.create_topic("lines", partitions=1)
        started.create_topic("keyed", partitions=3)
        started.create_topic("other-1", partitions=1)
        yield started


def produce(cluster: ClientCluster, topic: str, stdin: str, *args: str) -> Outcome:
    return replog(
        "produce", "--topic", topic, "--bootstrap-server", cluster.bootstrap, *args, stdin=stdin
    )


def consume(cluster: ClientCluster, *args: str) -> Outcome:
    return replog("consume", "--bootstrap-server", cluster.bootstrap, "--timeout-ms", "5000", *args)


def test_produce_then_consume_with_every_field(cluster: ClientCluster) -> None:
    """Both as subprocesses: the real entry point, stdin and stdout."""
    before = int(time.time() * 1000)
    produced = replog_process(
        "produce", "--topic", "lines", "--bootstrap-server", cluster.bootstrap,
        "--key-separator", ":", "--property", "parse.headers=true",
        "--property", "null.marker=NULL",
        "--header", "src=cli", "--acks", "all", "--compression-codec", "gzip",
        stdin="h1:a,h2\tk1:one\n\tk2:two\n\tNULL:NULL\n",
    )  # fmt: skip
    assert (produced.returncode, produced.stdout, produced.stderr) == (0, "", "")

    consumed = replog_process(
        "consume", "--bootstrap-server", cluster.bootstrap, "--topic", "lines",
        "--from-beginning", "--max-messages", "3",
        "--print-timestamp", "--print-partition", "--print-offset", "--print-headers",
        "--print-key",
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stderr == "Processed a total of 3 messages\n"
    lines = consumed.stdout.splitlines()
    assert [line.split("\t")[1:] for line in lines] == [
        ["Partition:0", "Offset:0", "src:cli,h1:a,h2:null", "k1", "one"],
        ["Partition:0", "Offset:1", "src:cli", "k2", "two"],
        ["Partition:0", "Offset:2", "src:cli", "null", "null"],  # the null marker: nulls
    ]
    for line in lines:
        kind, stamp = line.split("\t")[0].split(":")
        assert kind == "CreateTime" and before <= int(stamp) <= before + 60_000


def test_produce_sync_and_acks_1_then_value_only_and_key_separator(cluster: ClientCluster) -> None:
    produced = produce(
        cluster, "keyed", "a=1\nb=2\nc=3\n", "--key-separator", "=", "--sync", "--acks", "1"
    )
    assert produced.returncode == 0, produced.stderr
    values = consume(cluster, "--topic", "keyed", "--from-beginning", "--max-messages", "3")
    assert values.returncode == 0, values.stderr
    assert sorted(values.stdout.splitlines()) == ["1", "2", "3"]
    keyed = consume(
        cluster, "--topic", "keyed", "--from-beginning", "--max-messages", "3", "--print-key",
        "--key-separator", " -> ",
    )  # fmt: skip
    assert sorted(keyed.stdout.splitlines()) == ["a -> 1", "b -> 2", "c -> 3"]


def test_a_group_commits_what_it_printed_and_resumes_there(cluster: ClientCluster) -> None:
    lines = "".join(f"g{i}\n" for i in range(6))
    assert produce(cluster, "other-1", lines).returncode == 0
    first = consume(cluster, "--topic", "other-1", "--group", "g1", "--from-beginning",
                    "--max-messages", "4")  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == ["g0", "g1", "g2", "g3"]
    rest = consume(cluster, "--topic", "other-1", "--group", "g1", "--from-beginning",
                   "--timeout-ms", "3000")  # fmt: skip
    assert rest.returncode == 0, rest.stderr
    assert rest.stdout.splitlines() == ["g4", "g5"]  # the committed offset won over the reset
    assert rest.stderr == "Processed a total of 2 messages\n"
    # without a group nothing is committed: the same read twice
    for _ in range(2):
        again = consume(cluster, "--topic", "other-1", "--from-beginning", "--max-messages", "1")
        assert again.stdout == "g0\n"


def test_partition_and_offset(cluster: ClientCluster) -> None:
    assert produce(cluster, "lines", "p3\np4\n").returncode == 0
    read = consume(cluster, "--topic", "lines", "--partition", "0", "--offset", "3",
                   "--max-messages", "2", "--print-offset")  # fmt: skip
    assert read.returncode == 0, read.stderr
    assert read.stdout.splitlines() == ["Partition:0\tOffset:3\tp3", "Partition:0\tOffset:4\tp4"]
    earliest = consume(cluster, "--topic", "lines", "--partition", "0", "--offset", "earliest",
                       "--max-messages", "1", "--print-offset")  # fmt: skip
    assert earliest.stdout.startswith("Partition:0\tOffset:0\t")
    latest = consume(cluster, "--topic", "lines", "--partition", "0", "--timeout-ms", "1500")
    assert (latest.returncode, latest.stdout) == (0, "")  # only new records, none came
    assert latest.stderr == "Processed a total of 0 messages\n"


def test_include_reads_every_matching_topic(cluster: ClientCluster) -> None:
    read = consume(cluster, "--include", "other-.*|lines", "--from-beginning",
                   "--timeout-ms", "3000", "--print-partition")  # fmt: skip
    assert read.returncode == 0, read.stderr
    assert {"Partition:0\tg0", "Partition:0\tp3"} <= set(read.stdout.splitlines())
    none = consume(cluster, "--include", "nothing.*")
    assert none.returncode == 1
    assert none.stderr.splitlines()[0] == (
        "replog consume: --include 'nothing.*': no topic matches (topics: keyed, lines, other-1)"
    )


def test_consuming_a_topic_that_does_not_exist_is_one_line_and_exit_1(
    cluster: ClientCluster,
) -> None:
    missing = consume(cluster, "--topic", "no-such-topic", "--timeout-ms", "500")
    assert missing.returncode == 1
    assert missing.stderr.splitlines() == [
        "replog consume: --topic 'no-such-topic': no such topic (topics: keyed, lines, other-1)"
    ]
    assert missing.stdout == ""


def test_consuming_a_partition_the_topic_does_not_have_is_one_line_and_exit_1(
    cluster: ClientCluster,
) -> None:
    """Refused at once, not warned about and waited on forever (nothing ever arrives from a
    partition past the topic's last; --timeout-ms here only bounds the test)."""
    missing = consume(
        cluster, "--topic", "keyed", "--partition", "7", "--from-beginning", "--max-messages", "1"
    )
    assert missing.returncode == 1
    assert missing.stderr.splitlines() == [
        "replog consume: partition keyed-7 does not exist: topic 'keyed' has 3 partitions"
    ]
    assert missing.stdout == ""


def test_a_failed_send_is_one_line_and_exit_1(cluster: ClientCluster) -> None:
    failed = produce(cluster, "no-such-topic", "x\ny\n", "--producer-property", "max.block.ms=1500")
    assert failed.returncode == 1
    (line,) = failed.stderr.splitlines()
    assert line.startswith("replog produce: 1 record(s) to topic no-such-topic failed; first: ")
    assert line.endswith("UnknownTopicOrPartitionError: topic 'no-such-topic' does not exist")
    ignored = produce(cluster, "no-such-topic", "x\n", "--producer-property", "max.block.ms=500",
                      "--property", "ignore.error=true")  # fmt: skip
    assert ignored.returncode == 0 and "failed" in ignored.stderr


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["produce", "--topic", "lines", "--key-separator", ":"], "novalue\n",
         "replog produce: No key separator found on line number 1: 'novalue'"),
        (["produce", "--topic", "lines", "--property", "parse.kee=true"], "",
         "replog produce: --property parse.kee: unknown; known: parse.key, key.separator, "
         "parse.headers, headers.delimiter, headers.separator, headers.key.separator, "
         "null.marker, ignore.error"),
        (["produce", "--topic", "lines", "--producer-property", "acks=2"], "",
         "replog produce: acks='2': accepted values: all, -1, 0, 1"),
        (["produce", "--topic", "lines", "--header", "novalue"], "",
         "replog produce: --header 'novalue': expected KEY=VALUE"),
        (["consume", "--topic", "lines", "--property", "print.kee=true"], "",
         "replog consume: --property print.kee: unknown; known: print.timestamp, "
         "print.partition, print.offset, print.headers, print.key, print.value, key.separator, "
         "line.separator, headers.separator, null.literal"),
        (["consume", "--topic", "lines", "--from-beginning",
          "--consumer-property", "auto.offset.reset=latest"], "",
         "replog consume: --from-beginning and auto.offset.reset=latest cannot be used "
         "together"),
        (["consume", "--topic", "lines", "--consumer-property", "auto.offset.reset=bogus"], "",
         "replog consume: auto.offset.reset='bogus': accepted values: earliest, latest, none"),
        (["consume", "--include", "("], "",
         "replog consume: --include '(': not a regular expression: missing ), unterminated "
         "subpattern at position 0"),
    ],
)  # fmt: skip
def test_user_mistakes_are_one_line(
    cluster: ClientCluster, args: list[str], stdin: str, message: str
) -> None:
    result = replog(*args, "--bootstrap-server", cluster.bootstrap, stdin=stdin)
    assert result.returncode == 1
    assert result.stderr.splitlines()[0] == message, result.stderr
    if args[0] == "produce":
        assert result.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["consume", "--partition", "0", "--include", "x"], "--partition needs --topic"),
        (["consume", "--topic", "t", "--offset", "3"], "--offset needs --partition"),
        (["consume", "--topic", "t", "--partition", "0", "--offset", "3", "--from-beginning"],
         "--offset and --from-beginning cannot be used together"),
        (["consume", "--topic", "t", "--partition", "0", "--offset", "first"],
         "expected earliest, latest or an offset"),
        (["consume", "--topic", "t", "--include", "x"], "not allowed with argument"),
        (["consume"], "one of the arguments --topic --include is required"),
        (["consume", "--topic", "t", "--max-messages", "0"], "must be at least 1"),
        (["produce"], "the following arguments are required: --topic"),
        (["produce", "--topic", "t", "--acks", "2"], "invalid choice: '2'"),
        (["produce", "--topic", "t", "--compression-codec", "brotli"], "invalid choice"),
    ],
)  # fmt: skip
def test_usage_errors_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from replog.cli.main import main

    with pytest.raises(SystemExit) as exited:
        main([*args, "--bootstrap-server", "127.0.0.1:1"])
    assert exited.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith(f"replog {args[0]}: error: ") and message in last, last


def test_ctrl_c_prints_the_summary_and_exits_130(cluster: ClientCluster) -> None:
    """A consumer left running prints records as they arrive (no buffering in a pipe), and
    Ctrl-C ends it with Kafka's summary line and exit code 130."""
    printed: list[str] = []
    with subprocess.Popen(
        [sys.executable, "-m", "replog.cli.main", "consume", "--topic", "keyed",
         "--bootstrap-server", cluster.bootstrap, "--print-key"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A consumer that does not exit is made to dump every thread's stack (SIGABRT below).
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        # Ctrl-C reaches a foreground process with SIGINT's default action; a test run started
        # in the background inherits SIGINT ignored, and so did the consumer (the stacks showed
        # it still polling 30 s after the signal).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    ) as consumer:  # fmt: skip
        reader = threading.Thread(target=lambda: printed.extend(consumer.stdout or ()))
        reader.start()
        try:
            # It starts at the end (latest) once it has started: send until one record shows.
            for attempt in range(30):
                sent = produce(cluster, "keyed", f"live={attempt}\n", "--key-separator", "=")
                assert sent.returncode == 0, sent.stderr
                deadline = time.monotonic() + 1
                while not printed and time.monotonic() < deadline:
                    time.sleep(0.05)
                if printed:
                    break
            assert printed and printed[0].startswith("live\t"), printed
            consumer.send_signal(signal.SIGINT)
            try:
                consumer.wait(timeout=30)
            except subprocess.TimeoutExpired:
                # Seen twice in CI, never reproduced: keep where it hung for whoever reads this.
                consumer.send_signal(signal.SIGABRT)
                consumer.wait(timeout=10)
                stacks = consumer.stderr.read() if consumer.stderr else ""
                raise AssertionError(f"no exit 30 s after SIGINT; its threads:\n{stacks}") from None
        finally:
            if consumer.poll() is None:
                consumer.kill()
                consumer.wait()
            reader.join(timeout=10)  # every line printed is in `printed`
        err = consumer.stderr.read() if consumer.stderr else ""
    assert consumer.returncode == 130
    assert err.splitlines() == [
        f"Processed a total of {len(printed)} messages",
        "replog consume: interrupted",
    ]


def test_help_on_every_command() -> None:
    for command in (["produce"], ["consume"]):
        result = replog(*command, "--help")
        assert result.returncode == 0 and "kafka-console" in result.stdout


def test_timeout_ms_also_bounds_the_wait_for_an_unreachable_cluster() -> None:
    """Kafka's console consumer gives up after `--timeout-ms` whether or not the cluster
    answers; replog's topic check must not wait the admin's 60 s."""
    dead = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    result = replog("consume", "--topic", "t", "--timeout-ms", "500", "--bootstrap-server", dead)
    assert time.monotonic() - started < 15
    assert result.returncode == 1
    # The address the user gave, not "the active controller" they never named (the Kafka
    # admin client's wording: "Metadata: no answer within 0.5 s: <address>: connection refused",
    # the budget being what is left of --timeout-ms, so 0.499 s at times).
    last = result.stderr.splitlines()[-1]
    assert last.startswith("replog consume: Metadata: no answer within "), last
    assert dead in last


@pytest.mark.parametrize("command", ["consume", "perf"])
def test_the_bootstrap_servers_may_be_given_in_either_spelling(command: str) -> None:
    # The topic check reads either spelling: reading config["bootstrap.servers"] only,
    # --consumer-property bootstrap_servers=... (a spelling the client accepts) would be a
    # KeyError traceback.
    dead = f"127.0.0.1:{free_port()}"
    if command == "consume":
        args = ["consume", "--topic", "t", "--timeout-ms", "500", "--consumer-property"]
    else:
        args = ["perf", "consume", "--topic", "t", "--messages", "1", "--timeout", "500"]
        args.append("--consumer-props")
    result = replog(*args, f"bootstrap_servers={dead}")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    last = result.stderr.splitlines()[-1]
    assert "Metadata: no answer within " in last and dead in last, last


@pytest.mark.parametrize("command", ["produce", "consume"])
def test_a_refused_bootstrap_address_is_said_at_once_and_fails_after_the_setup_timeout(
    command: str,
) -> None:
    """Issue #52: a --bootstrap-server whose port refuses connections used to wait 60 s in
    silence. The refusal is a WARNING at once, and the command fails with it once the
    refusals have lasted socket.connection.setup.timeout.max.ms."""
    dead = f"127.0.0.1:{free_port()}"
    option = {"produce": "--producer-property", "consume": "--consumer-property"}[command]
    started = time.monotonic()
    result = replog_process(
        command, "--topic", "t", "--bootstrap-server", dead,
        option, "socket.connection.setup.timeout.max.ms=1000", stdin="v\n",
    )  # fmt: skip
    assert time.monotonic() - started < 20  # the interpreter's start-up included
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[-1].startswith(f"replog {command}: ")
    warnings = [line for line in lines if " WARNING " in line and "connection refused" in line]
    assert warnings and all(dead in line for line in warnings)
    assert "retrying for up to socket.connection.setup.timeout.max.ms=1000 ms" in warnings[0]
    if command == "consume":  # the topic check, through the admin client, fails first
        assert f"connection refused by {dead} for 1 s: is the cluster running" in lines[-1]
    else:
        assert f"{dead}: connection refused, at every attempt for " in lines[-1]


def test_consuming_below_the_log_start_offset_says_it_resets(cluster: ClientCluster) -> None:
    """Issue #52: `--offset` below the log start offset (after delete-records) printed nothing
    and said nothing; the reset auto.offset.reset makes is now a WARNING on stderr."""
    cluster.create_topic("trimmed-lines", partitions=1)
    assert produce(cluster, "trimmed-lines", "".join(f"{i}\n" for i in range(10))).returncode == 0
    with Admin(bootstrap_servers=cluster.bootstrap) as admin:
        admin.delete_records({TopicPartition("trimmed-lines", 0): 5})
    result = replog_process(  # a process of its own: its logging goes to its stderr
        "consume", "--bootstrap-server", cluster.bootstrap, "--timeout-ms", "5000",
        "--topic", "trimmed-lines", "--partition", "0", "--offset", "2",
        "--consumer-property", "auto.offset.reset=earliest", "--max-messages", "5",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["5", "6", "7", "8", "9"]
    assert (
        "Fetch position 2 is out of range for partition trimmed-lines-0 (the log holds [5, 10) "
        "for consumers), resetting offset to earliest"
    ) in result.stderr


def test_lines_that_each_fit_the_topics_limit_all_land_together(cluster: ClientCluster) -> None:
    """Issue #52: 10 lines of 300 bytes to a topic of max.message.bytes=1000 all failed with
    the default linger (one batch over the limit); now every line lands, once, in order."""
    cluster.create_topic("small-lines", partitions=1, configs={"max.message.bytes": "1000"})
    lines = [f"{i}".ljust(300, "x") for i in range(10)]
    produced = produce(
        cluster, "small-lines", "".join(f"{line}\n" for line in lines),
        "--producer-property", "linger.ms=100",
    )  # fmt: skip
    assert (produced.returncode, produced.stderr) == (0, "")
    consumed = consume(
        cluster, "--topic", "small-lines", "--from-beginning", "--max-messages", "10"
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == lines
