"""What the Kafka application checks (kafka_connect_check.py, kafka_streams_check.py) share: the
jars of Kafka Connect and Kafka Streams, a local replog cluster on a compact port range, and a
Java process run in the background.

- Jars: `bench/kafka/apps/<app>/pom.xml` (`connect`: Kafka Connect 4.3.1 with the FileStream
  connectors; `streams`: Kafka Streams 4.4.0 and Kafka's streams examples; each pom says why
  those versions) through `mvn dependency:copy-dependencies`, once, into
  `~/.cache/replog-bench/kafka-<app>/libs` (Maven's cache after that).
- The cluster: 3 combined nodes whose gRPC listeners are `base`..`base+2` and Kafka listeners
  `base+10`..`base+12`, with neither metrics endpoints nor controller Kafka listeners (which
  `replog cluster start` puts 100 ports higher), so a check stays within 20 ports of its base;
  it is written with `LocalCluster`, started and stopped with `replog cluster`.
- A Java process logs to a file; stopping it is SIGTERM (its shutdown hook: a Connect worker
  or a Streams app closes cleanly), SIGKILL after a grace period.
- Compaction: the apps create their compacted topics with `COMPACTED_TOPIC_CONFIGS` (segments
  that roll on the next append after 100 ms, cleaned at a dirty ratio of 1 %), the
  cluster's cleaner looks for work every second (`fast_cleaner`, a dynamic broker config),
  and `compaction` reads what a topic holds: the offsets written against the records left,
  and the latest value of each key.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from replog_cli import replog_cli

HERE = Path(__file__).resolve().parent
APPS = HERE / "kafka" / "apps"
KAFKA_LISTENER_OFFSET = 10  # node i's Kafka listener: base + 10 + i - 1
LOG4J2 = """rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
logger.connect.name = org.apache.kafka.connect
logger.connect.level = INFO
logger.streams.name = org.apache.kafka.streams
logger.streams.level = INFO
"""


def app_libs(app: str) -> Path:
    """The jars of `app` (`connect` or `streams`; fetched with Maven once)."""
    cache = Path.home() / f".cache/replog-bench/kafka-{app}"
    libs = cache / "libs"
    if libs.is_dir():
        return libs
    partial = cache / "libs.partial"
    subprocess.run(
        [
            "mvn",
            "-q",
            "-B",
            "-f",
            str(APPS / app / "pom.xml"),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={partial}",
        ],
        check=True,
    )
    partial.rename(libs)
    return libs


@contextmanager
def running_cluster(data_dir: Path, base_port: int) -> Iterator[str]:
    """A 3-node replog cluster in `data_dir` (module docstring), stopped on exit; yields its
    bootstrap servers."""
    from replog.cli.local_cluster import KAFKA_CONTROLLER_LISTENER, LocalCluster

    planned = LocalCluster.plan(
        str(data_dir), 3, base_port, kafka_base_port=base_port + KAFKA_LISTENER_OFFSET
    )
    nodes = tuple(
        dataclasses.replace(
            node,
            metrics_address=None,
            listeners={k: v for k, v in node.listeners.items() if k != KAFKA_CONTROLLER_LISTENER},
        )
        for node in planned.nodes
    )
    dataclasses.replace(planned, nodes=nodes).write({})
    replog_cli("cluster", "start", "--data-dir", str(data_dir))
    try:
        yield ",".join(f"127.0.0.1:{base_port + KAFKA_LISTENER_OFFSET + i}" for i in range(3))
    finally:
        replog_cli("cluster", "stop", "--data-dir", str(data_dir))


class JavaProcess:
    """One JVM (`main_class` with `args`, the jars of `libs`) logging to `log_path`."""

    def __init__(
        self, libs: Path, main_class: str, args: list[str], log_path: Path, work: Path
    ) -> None:
        log4j = work / "log4j2.properties"
        log4j.write_text(LOG4J2)
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            [
                "java",
                "-Xmx512m",
                f"-Dlog4j2.configurationFile={log4j}",
                "-cp",
                f"{libs}/*",
                main_class,
                *args,
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=work,
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, grace_s: float = 60) -> int:
        """SIGTERM, then SIGKILL after `grace_s`; the exit status."""
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode

    def log_tail(self, lines: int = 15) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 120) -> None:
    """Poll `condition` every half second; TimeoutError naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(0.5)


def topic_config(bootstrap: str, topic: str, name: str) -> str | None:
    """A topic config's value as the brokers describe it (DescribeConfigs, through
    confluent-kafka: Kafka's own view)."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    entry = configs.get(name)
    return None if entry is None else entry.value


# Topic configs an app creates its compacted topics with (under its own prefix): segments
# rolled soon enough that the cleaner's next pass reaches nearly every record (it never cleans
# the active segment); 1 MiB, Kafka 4's smallest segment.bytes, holds any batch the apps'
# producers make (a batch larger than a segment is refused, as Kafka refuses it).
COMPACTED_TOPIC_CONFIGS = {
    "segment.bytes": "1048576",
    "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.01",
}


def fast_cleaner(bootstrap: str, backoff_ms: int = 1000) -> None:
    """Every broker's cleaner looks for a log to clean every `backoff_ms` (the cluster default
    broker config, taken by the running cleaners)."""
    replog_cli(
        "configs",
        "alter",
        "--bootstrap-server",
        bootstrap,
        "--entity-type",
        "brokers",
        "--entity-default",
        "--add-config",
        f"log.cleaner.backoff.ms={backoff_ms}",
    )


@dataclasses.dataclass(frozen=True)
class Compaction:
    """What a topic holds: offsets written (its partitions' high watermarks: nothing is
    deleted from their starts) against the records left, and the latest value of each key."""

    written: int
    left: int
    latest: dict[bytes | None, bytes | None]

    def said(self) -> str:
        return f"{self.left} records left of {self.written} written, {len(self.latest)} keys"

    def about_one_per_key(self) -> bool:
        """At most two records a key are left (the latest, and one the active segment of its
        partition may still hold): a topic written once per key holds that already; whether
        any was removed is `written` against `left`."""
        return self.left <= 2 * len(self.latest)


def read_to_end(
    consumer: Any, topic: str, partitions: Iterable[int], timeout_s: float
) -> Iterator[Any]:
    """The records of `topic`'s `partitions`, each read from its start until it reports its end
    (a confluent-kafka consumer made with `enable.partition.eof`: the high watermark, or the
    last stable offset read_committed)."""
    from confluent_kafka import KafkaError, TopicPartition

    pending = set(partitions)
    consumer.assign([TopicPartition(topic, p, 0) for p in pending])
    deadline = time.monotonic() + timeout_s
    while pending:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: partitions {sorted(pending)} not read to their end")
        message = consumer.poll(1.0)
        if message is None:
            continue
        error = message.error()
        if error is None:
            yield message
        elif error.code() == KafkaError._PARTITION_EOF:
            pending.discard(message.partition())
        else:
            raise RuntimeError(f"{topic}-{message.partition()}: {error}")


def compaction(bootstrap: str, topic: str, timeout_s: float = 60) -> Compaction:
    """Read `topic` from each partition's start to its high watermark now (confluent-kafka,
    which reads cleaned batches as Kafka serves them)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "replog-compaction-check",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        partitions = list(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in partitions
        }
        left, latest = 0, {}
        for message in read_to_end(consumer, topic, [p for p, e in ends.items() if e], timeout_s):
            if message.offset() < ends[message.partition()]:
                left += 1
                latest[message.key()] = message.value()
        return Compaction(sum(ends.values()), left, latest)
    finally:
        consumer.close()


def wait_compacted(bootstrap: str, topic: str, timeout_s: float = 120) -> Compaction:
    """`compaction` of `topic` once `about_one_per_key` holds, or after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = compaction(bootstrap, topic)
        if found.about_one_per_key() or time.monotonic() > deadline:
            return found
        time.sleep(2)


def topics(bootstrap: str) -> set[str]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    return set(admin.list_topics(timeout=30).topics)


Result = tuple[str, bool, str]  # a check's name, whether it passed, what it saw
Run = Callable[[Path, int, int, Path], list[Result]]  # (libs, base port, lines, work dir)


def check_main(
    app: str,
    run: Run,
    doc: str,
    argv: Sequence[str] | None,
    *,
    lines: int,
    base_port: int,
    failures: tuple[type[Exception], ...] = (),
) -> int:
    """A check script's command line: run `run` in a temporary directory and print a row per
    check; exit status 1 when any failed (or the run raised one of `failures`, RuntimeError or
    TimeoutError, printed as a failed row)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=lines)
    parser.add_argument("--base-port", type=int, default=base_port)
    parser.add_argument("--keep", help="copy the work directory (logs) here at the end")
    args = parser.parse_args(argv)
    if shutil.which("java") is None:
        print(f"kafka {app} check: needs java on PATH", file=sys.stderr)
        return 1
    libs = app_libs(app)
    with tempfile.TemporaryDirectory(prefix=f"replog-{app}-") as work:
        try:
            results = run(libs, args.base_port, args.lines, Path(work))
        except (RuntimeError, TimeoutError, *failures) as exc:
            results = [("run", False, str(exc)[-2000:])]
        if args.keep:
            shutil.copytree(work, args.keep, dirs_exist_ok=True)
    return print_results(results)


def print_results(results: Sequence[tuple[str, bool, str]]) -> int:
    """A row per check (ok or FAIL, its name, what it said); the exit status: 1 when any
    failed."""
    width = max(len(name) for name, _, _ in results)
    for name, ok, said in results:
        print(f"{'ok  ' if ok else 'FAIL'} {name:<{width}}  {said}")
    return 0 if all(ok for _, ok, _ in results) else 1
