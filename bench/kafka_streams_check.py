"""Kafka Streams against replog's Kafka listener: a compatibility check.

Starts a local 3-node replog cluster (bench/kafka_apps.py), creates Kafka's demo topics
(`streams-plaintext-input`, `streams-wordcount-output`), writes lines of words to the input
(confluent-kafka) and runs Apache Kafka's `WordCountDemo` (kafka-streams-examples on Kafka
Streams 4.4.0, at-least-once: a `groupBy` through a repartition topic into a `count()` state
store backed by a compacted changelog topic), then checks:

- counts: the latest count of every word in the output topic is the number of times it was
  written;
- changelog: the state store's changelog topic exists with `cleanup.policy=compact`, as the
  brokers describe it;
- cleaned: the app creates its internal topics with small segments (`topic.segment.bytes` and
  the like, Streams' `topic.` prefix: `kafka_apps.COMPACTED_TOPIC_CONFIGS`); once a few more
  lines came one at a time, the brokers' cleaners (looking every second, a dynamic broker
  config) leave about one record per word in the changelog, and the latest of each is the
  word's count;
- restore: the app is stopped (SIGTERM), its local state directory deleted, more lines
  written, and the app started again: it restores the store from the cleaned changelog (no
  more records than the changelog had left) and its counts go on from there (a store that came
  back empty would count the new lines from 0).

With `--guarantee exactly_once_v2` the app runs with Streams' `processing.guarantee` set so
(its producers transactional, its consumers read_committed, offsets committed in the
transactions) and its record cache off, so that every update of a count is written; the
counts are read read_committed, and before the restore the app is killed with SIGKILL while
lines are still coming (once a read_uncommitted reader sees output of an open transaction) and
started again with its state directory kept (as Kafka's own Streams EOS system tests do).
Further checks:

- transactional: the brokers' coordinators list the app's transactional ids
  (`replog transactions list`);
- counts after a SIGKILL: the restarted app counts every line;
- exactly once: the output read read_committed gives, for every word, the counts 1, 2, 3, ...
  up to the times it was written, each once (a record processed twice would show as a count
  repeated, one lost as a count skipped); how many records read_uncommitted reads is said (an
  aborted transaction's output, when the kill left one open with output written).

    .venv/bin/python bench/kafka_streams_check.py [--lines 500] [--base-port 27630]
        [--guarantee at_least_once|exactly_once_v2]

Bench only: it needs Java 17+ and Maven (CI never runs it). Ports: the cluster's base..base+12.
Exit status 1 when any check fails.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import re
import shutil
import signal
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from kafka_apps import (
    COMPACTED_TOPIC_CONFIGS,
    JavaProcess,
    Result,
    check_main,
    compaction,
    fast_cleaner,
    read_to_end,
    running_cluster,
    topic_config,
    topics,
    wait_compacted,
    wait_for,
)
from replog_cli import create_topic, replog_cli

INPUT, OUTPUT = "streams-plaintext-input", "streams-wordcount-output"
APPLICATION_ID = "replog-wordcount"
MAIN = "org.apache.kafka.streams.examples.wordcount.WordCountDemo"
# Kafka Streams' log line at the end of a store's restoration (StoreChangelogReader).
RESTORED = re.compile(r"Finished restoring changelog \S+ to store \S+ with a total number of (\d+)")
WORDS = ("replog", "kafka", "streams", "log", "compaction", "changelog", "state", "store")
TRICKLED = 8  # lines written one at a time after the first ones: each word once
AT_LEAST_ONCE, EXACTLY_ONCE = "at_least_once", "exactly_once_v2"
# Lines written while the app runs, before it is killed: so many at a time, this far apart.
FLOW_LINES, FLOW_PAUSE_S = 10, 0.2


def lines_of_words(start: int, count: int) -> list[str]:
    """Lines of 1..4 words, the same for the same `start`."""
    return [
        " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(1 + i % 4))
        for i in range(start, start + count)
    ]


def produce(bootstrap: str, lines: list[str]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for line in lines:
        producer.produce(INPUT, value=line.encode())
    left = producer.flush(60)
    if left:
        raise RuntimeError(f"{left} lines not acknowledged")


def flow(bootstrap: str, lines: list[str]) -> None:
    """`lines`, FLOW_LINES at a time, FLOW_PAUSE_S apart: input that keeps coming."""
    for start in range(0, len(lines), FLOW_LINES):
        produce(bootstrap, lines[start : start + FLOW_LINES])
        time.sleep(FLOW_PAUSE_S)


class Counts:
    """The latest count per word in the output topic, read as it grows at `isolation`, each
    poll waiting up to `wait_s` for more."""

    def __init__(
        self, bootstrap: str, isolation: str = "read_committed", wait_s: float = 1.0
    ) -> None:
        from confluent_kafka import Consumer

        self.bootstrap, self.wait_s = bootstrap, wait_s
        self.latest: dict[str, int] = {}
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"replog-wordcount-check-{isolation}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": isolation,
            }
        )
        self.consumer.subscribe([OUTPUT])

    def poll(self) -> dict[str, int]:
        for message in self.consumer.consume(1000, timeout=self.wait_s):
            key, value = message.key(), message.value()
            if message.error() is None and key is not None and value is not None:
                (self.latest[key.decode()],) = struct.unpack(">q", value)
        return self.latest

    def close(self) -> None:
        self.consumer.close()


def history(bootstrap: str, isolation: str, timeout_s: float = 60) -> dict[str, list[int]]:
    """Every count of every word in the output topic, in the order written, read at
    `isolation` from each partition's start to its end (the last stable offset when
    read_committed)."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"replog-wordcount-history-{isolation}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    try:
        partitions = consumer.list_topics(OUTPUT, timeout=30).topics[OUTPUT].partitions
        counts: dict[str, list[int]] = {}
        for message in read_to_end(consumer, OUTPUT, partitions, timeout_s):
            key, value = message.key(), message.value()
            if key is not None and value is not None:
                counts.setdefault(key.decode(), []).append(struct.unpack(">q", value)[0])
        return counts
    finally:
        consumer.close()


def not_exactly_once(counts: dict[str, list[int]], expected: Counter[str]) -> dict[str, list[int]]:
    """The words whose counts, in the order written, are not 1, 2, ... n for a word written n
    times (a word never counted has none; a word never written, any)."""
    return {
        word: counts.get(word, [])
        for word in sorted(set(counts) | set(expected))
        if counts.get(word, []) != list(range(1, expected[word] + 1))
    }


def said_counts(counts: list[int]) -> str:
    repeated = sorted(n for n, times in Counter(counts).items() if times > 1)
    last = counts[-1] if counts else None
    return f"({len(counts)} counts, last {last}, repeated {repeated[:5]})"


def exactly_once(bootstrap: str, expected: Counter[str]) -> list[Result]:
    """The output's counts read_committed are 1, 2, ... n for a word written n times; how many
    more records read_uncommitted reads (aborted transactions', which depend on where the kill
    fell, so said, not checked)."""
    committed = history(bootstrap, "read_committed")
    uncommitted = history(bootstrap, "read_uncommitted")
    wrong = not_exactly_once(committed, expected)
    records = sum(map(len, committed.values()))
    unread = sum(map(len, uncommitted.values()))
    return [
        (
            "exactly once",
            not wrong,
            f"{records} counts read_committed for {sum(expected.values())} words written; "
            f"words whose counts are not 1..n: {len(wrong)} "
            + "; ".join(f"{word} {said_counts(c)}" for word, c in wrong.items())
            + f"; {unread} records read_uncommitted",
        ),
    ]


def transactional_ids(bootstrap: str) -> list[str]:
    """The app's transactional ids the brokers' coordinators know (ListTransactions)."""
    listed = json.loads(
        replog_cli("transactions", "list", "--bootstrap-server", bootstrap, "--json").strip()
    )
    return sorted(
        row["TransactionalId"]
        for row in listed
        if str(row["TransactionalId"]).startswith(APPLICATION_ID)
    )


def crash(
    libs: Path, props: Path, work: Path, app: JavaProcess, counts: Counts, lines: list[str]
) -> JavaProcess:
    """Write `lines` while the app runs, kill it (SIGKILL) once it has counted a third of their
    words and a read_uncommitted reader sees counts past the committed ones (a transaction open
    with output written, most likely still open at the kill), and start it again with its state
    directory kept; the new app."""
    words = sum(len(line.split()) for line in lines)
    before = sum(counts.poll().values())
    ahead = Counts(counts.bootstrap, "read_uncommitted", wait_s=0.1)
    writer = threading.Thread(target=flow, args=(counts.bootstrap, lines))
    writer.start()
    try:

        def open_output() -> bool:
            committed = sum(counts.poll().values())
            return committed >= before + words // 3 and sum(ahead.poll().values()) > committed

        wait_for(
            lambda: open_output() or not app.alive(),
            "a third of the flowing lines counted, more written uncommitted",
            180,
        )
        if not app.alive():
            raise RuntimeError(f"WordCountDemo exited:\n{app.log_tail()}")
        app.process.send_signal(signal.SIGKILL)
        app.stop()
        return JavaProcess(libs, MAIN, [str(props)], work / "app.log", work)
    finally:
        ahead.close()
        writer.join()


def properties(bootstrap: str, work: Path, guarantee: str) -> Path:
    path = work / "wordcount.properties"
    path.write_text(
        "\n".join(
            [
                f"application.id={APPLICATION_ID}",
                f"bootstrap.servers={bootstrap}",
                f"state.dir={work / 'state'}",
                "replication.factor=3",
                f"processing.guarantee={guarantee}",
                "commit.interval.ms=1000",
                # Every update of a count written, so that a repeated or skipped one shows.
                *(["statestore.cache.max.bytes=0"] if guarantee == EXACTLY_ONCE else []),
                *(f"topic.{name}={value}" for name, value in COMPACTED_TOPIC_CONFIGS.items()),
                "",
            ]
        )
    )
    return path


def run(
    libs: Path, base_port: int, lines: int, work: Path, guarantee: str = AT_LEAST_ONCE
) -> list[Result]:
    results: list[Result] = []
    eos = guarantee == EXACTLY_ONCE
    with running_cluster(work / "cluster", base_port) as bootstrap:
        fast_cleaner(bootstrap)
        create_topic(bootstrap, INPUT, 2)
        create_topic(bootstrap, OUTPUT, 2)
        props = properties(bootstrap, work, guarantee)
        first = lines_of_words(0, lines)
        produce(bootstrap, first)
        expected = Counter(word for line in first for word in line.split())
        counts = Counts(bootstrap)
        try:
            app = JavaProcess(libs, MAIN, [str(props)], work / "app.log", work)
            try:
                with contextlib.suppress(TimeoutError):  # the check below says what came
                    wait_for(
                        lambda: counts.poll() == expected or not app.alive(), "the counts", 180
                    )
                if not app.alive():
                    raise RuntimeError(f"WordCountDemo exited:\n{app.log_tail()}")
                got = counts.poll()
                said = f"{len(got)} words, {sum(got.values())} counted of {sum(expected.values())}"
                results.append(("counts", got == expected, said))
                if eos:
                    ids = transactional_ids(bootstrap)
                    results.append(("transactional", bool(ids), f"transactional ids {ids}"))
                changelogs = sorted(t for t in topics(bootstrap) if t.endswith("-changelog"))
                policies = {t: topic_config(bootstrap, t, "cleanup.policy") for t in changelogs}
                results.append(
                    (
                        "changelog compacted",
                        bool(policies) and all(p == "compact" for p in policies.values()),
                        str(policies),
                    )
                )
                # A line at a time: the changelog's earlier segments roll, and the cleaner
                # reaches every update but the last few.
                for word in WORDS[:TRICKLED]:
                    time.sleep(0.5)
                    produce(bootstrap, [word])
                    expected[word] += 1
                with contextlib.suppress(TimeoutError):
                    wait_for(lambda: counts.poll() == expected, "the counts", 60)
                left = 0
                for changelog in changelogs:
                    found = wait_compacted(bootstrap, changelog)
                    left += found.left
                    latest = {
                        k.decode(): struct.unpack(">q", v[-8:])[0]
                        for k, v in found.latest.items()
                        if k is not None and v is not None
                    }
                    results.append(
                        (
                            f"changelog cleaned ({changelog})",
                            found.about_one_per_key()
                            and found.written > found.left
                            and latest == expected,
                            f"{found.said()}; the latest of each word is its count: "
                            f"{latest == expected}",
                        )
                    )
                if eos:
                    flowed = lines_of_words(2 * lines, lines)
                    app = crash(libs, props, work, app, counts, flowed)
                    expected += Counter(word for line in flowed for word in line.split())
                    with contextlib.suppress(TimeoutError):
                        wait_for(
                            lambda: counts.poll() == expected or not app.alive(), "the counts", 180
                        )
                    got = counts.poll()
                    results.append(
                        (
                            "counts after a SIGKILL",
                            got == expected,
                            f"{sum(got.values())} counted of {sum(expected.values())} after the "
                            "app was killed and started again with its state",
                        )
                    )
                    # What a restore may read: the changelogs as they are now (their cleaning
                    # was checked above).
                    left = sum(compaction(bootstrap, c).left for c in changelogs)
            finally:
                status = app.stop()
            shutil.rmtree(work / "state", ignore_errors=True)
            second = lines_of_words(lines, lines)
            produce(bootstrap, second)
            expected += Counter(word for line in second for word in line.split())
            first_log_bytes = (work / "app.log").stat().st_size
            app = JavaProcess(libs, MAIN, [str(props)], work / "app.log", work)
            try:
                with contextlib.suppress(TimeoutError):  # the check below says what came
                    wait_for(
                        lambda: counts.poll() == expected or not app.alive(), "the counts", 180
                    )
                got = counts.poll()
                with open(work / "app.log", "rb") as f:
                    f.seek(first_log_bytes)
                    restored = sum(map(int, RESTORED.findall(f.read().decode(errors="replace"))))
                results.append(
                    (
                        "restored from the changelog",
                        got == expected and 0 < restored <= left,
                        f"{sum(got.values())} counted of {sum(expected.values())} after a restart "
                        f"without local state (first run exited {status}; {restored} changelog "
                        f"records restored, {left} left in it after cleaning)",
                    )
                )
            finally:
                app.stop()
            if eos:
                results.extend(exactly_once(bootstrap, expected))
        finally:
            counts.close()
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--guarantee", choices=(AT_LEAST_ONCE, EXACTLY_ONCE), default=AT_LEAST_ONCE)
    known, rest = parser.parse_known_args(argv)
    return check_main(
        "streams",
        functools.partial(run, guarantee=known.guarantee),
        __doc__ or "",
        rest,
        lines=500,
        base_port=27630,
    )


if __name__ == "__main__":
    sys.exit(main())
