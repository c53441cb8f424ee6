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

    .venv/bin/python bench/kafka_streams_check.py [--lines 500] [--base-port 27630]

Bench only: it needs Java 17+ and Maven (CI never runs it). Ports: the cluster's base..base+12.
Exit status 1 when any check fails.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import struct
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from kafka_apps import (
    COMPACTED_TOPIC_CONFIGS,
    JavaProcess,
    Result,
    check_main,
    fast_cleaner,
    running_cluster,
    topic_config,
    topics,
    wait_compacted,
    wait_for,
)
from replog_cli import create_topic

INPUT, OUTPUT = "streams-plaintext-input", "streams-wordcount-output"
APPLICATION_ID = "replog-wordcount"
MAIN = "org.apache.kafka.streams.examples.wordcount.WordCountDemo"
# Kafka Streams' log line at the end of a store's restoration (StoreChangelogReader).
RESTORED = re.compile(r"Finished restoring changelog \S+ to store \S+ with a total number of (\d+)")
WORDS = ("replog", "kafka", "streams", "log", "compaction", "changelog", "state", "store")
TRICKLED = 8  # lines written one at a time after the first ones: each word once


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


class Counts:
    """The latest count per word in the output topic, read as it grows."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Consumer

        self.latest: dict[str, int] = {}
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "replog-wordcount-check",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        self.consumer.subscribe([OUTPUT])

    def poll(self) -> dict[str, int]:
        for message in self.consumer.consume(1000, timeout=1.0):
            key, value = message.key(), message.value()
            if message.error() is None and key is not None and value is not None:
                (self.latest[key.decode()],) = struct.unpack(">q", value)
        return self.latest

    def close(self) -> None:
        self.consumer.close()


def properties(bootstrap: str, work: Path) -> Path:
    path = work / "wordcount.properties"
    path.write_text(
        "\n".join(
            [
                f"application.id={APPLICATION_ID}",
                f"bootstrap.servers={bootstrap}",
                f"state.dir={work / 'state'}",
                "replication.factor=3",
                "processing.guarantee=at_least_once",
                "commit.interval.ms=1000",
                *(f"topic.{name}={value}" for name, value in COMPACTED_TOPIC_CONFIGS.items()),
                "",
            ]
        )
    )
    return path


def run(libs: Path, base_port: int, lines: int, work: Path) -> list[Result]:
    results: list[Result] = []
    with running_cluster(work / "cluster", base_port) as bootstrap:
        fast_cleaner(bootstrap)
        create_topic(bootstrap, INPUT, 2)
        create_topic(bootstrap, OUTPUT, 2)
        props = properties(bootstrap, work)
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
        finally:
            counts.close()
    return results


def main(argv: Sequence[str] | None = None) -> int:
    return check_main(
        "streams",
        run,
        __doc__ or "",
        argv,
        lines=500,
        base_port=27630,
    )


if __name__ == "__main__":
    sys.exit(main())
