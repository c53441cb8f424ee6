"""Kafka Connect (distributed mode) against replog's Kafka listener: a compatibility check.

Starts a local 3-node replog cluster (bench/kafka_apps.py), then one Connect worker
(`ConnectDistributed` of connect-runtime 4.3.1, Kafka's jars from Maven) whose config, offset and
status topics it creates itself (compacted: the worker refuses to start when one is not
`cleanup.policy=compact`). Through the worker's REST API it creates a FileStreamSource
connector (a file -> topic `connect-test`, which the worker creates, KIP-158) and a
FileStreamSink connector (the topic -> another file), and checks:

- internal topics: the three exist with `cleanup.policy=compact`, as the brokers describe them,
  and so does `__consumer_offsets` (with Kafka's 100 MiB `segment.bytes`);
- pipeline: every line written to the source file arrives in the sink file, once (the last
  few one at a time, so that the source commits its offset again and again);
- cleaned: the worker creates its internal topics with small segments
  (`config.storage.segment.bytes` and the like, KIP-605's worker settings:
  `kafka_apps.COMPACTED_TOPIC_CONFIGS`), and the brokers' cleaners (looking every second, a
  dynamic broker config) leave about one record per key of each;
- restart: the worker is stopped (SIGTERM) and started again; both connectors come back from
  the cleaned config topic, RUNNING; lines written meanwhile arrive, and none of the earlier
  ones is copied again (the source resumed from its offset in the cleaned offset topic, the
  sink from its group's committed offsets); the topics are cleaned again after it.

    .venv/bin/python bench/kafka_connect_check.py [--lines 200] [--base-port 27600]

Bench only: it needs Java 17+ and Maven (CI never runs it). Ports: the cluster's base..base+12
and the worker's REST listener at base+20. Exit status 1 when any check fails.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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

FILE_CONNECTORS = "org.apache.kafka.connect.file.FileStream"
INTERNAL_TOPICS = ("connect-configs", "connect-offsets", "connect-status")
TOPIC = "connect-test"
REST_PORT_OFFSET = 20
STORAGE_PREFIXES = ("config.storage", "offset.storage", "status.storage")
TRICKLED = 8  # the last lines of the first run, written one at a time


def worker_properties(bootstrap: str, rest_port: int, work: Path) -> Path:
    path = work / "connect-distributed.properties"
    path.write_text(
        "\n".join(
            [
                f"bootstrap.servers={bootstrap}",
                "group.id=replog-connect-check",
                "key.converter=org.apache.kafka.connect.storage.StringConverter",
                "value.converter=org.apache.kafka.connect.storage.StringConverter",
                f"config.storage.topic={INTERNAL_TOPICS[0]}",
                f"offset.storage.topic={INTERNAL_TOPICS[1]}",
                f"status.storage.topic={INTERNAL_TOPICS[2]}",
                "config.storage.replication.factor=3",
                "offset.storage.replication.factor=3",
                "status.storage.replication.factor=3",
                "offset.flush.interval.ms=500",
                # KIP-558's topic records: a sink task writes one for each batch it takes until
                # the worker reads the first back (82 of one key in a burst, in one run), all
                # in the status partition's active segment, which no cleaner touches until its
                # next write: left uncleaned, they would read as a cleaner that did nothing.
                "topic.tracking.enable=false",
                f"listeners=http://127.0.0.1:{rest_port}",
                *(
                    f"{prefix}.{name}={value}"
                    for prefix in STORAGE_PREFIXES
                    for name, value in COMPACTED_TOPIC_CONFIGS.items()
                ),
                "",
            ]
        )
    )
    return path


class Rest:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            text = answer.read().decode()
        return json.loads(text) if text else None

    def answers(self) -> bool:
        try:
            self.call("GET", "/connectors")
            return True
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def running(self, name: str) -> bool:
        try:
            status = self.call("GET", f"/connectors/{name}/status")
        except urllib.error.HTTPError:
            return False
        tasks = status.get("tasks", [])
        return (
            status["connector"]["state"] == "RUNNING"
            and bool(tasks)
            and all(t["state"] == "RUNNING" for t in tasks)
        )


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def cleaned(bootstrap: str, when: str) -> Result:
    """Whether each internal topic holds about one record a key (`Compaction`), and records
    written to them were removed."""
    found = {topic: wait_compacted(bootstrap, topic) for topic in INTERNAL_TOPICS}
    ok = all(c.about_one_per_key() for c in found.values()) and sum(
        c.written for c in found.values()
    ) > sum(c.left for c in found.values())
    said = "; ".join(f"{topic}: {c.said()}" for topic, c in found.items())
    return (f"internal topics cleaned {when}", ok, said)


def run(libs: Path, base_port: int, lines: int, work: Path) -> list[Result]:
    results: list[Result] = []
    source_file, sink_file = work / "source.txt", work / "sink.txt"
    source_file.write_text("")
    rest_port = base_port + REST_PORT_OFFSET
    rest = Rest(rest_port)
    with running_cluster(work / "cluster", base_port) as bootstrap:
        fast_cleaner(bootstrap)
        props = worker_properties(bootstrap, rest_port, work)
        main = "org.apache.kafka.connect.cli.ConnectDistributed"

        def start_worker() -> JavaProcess:
            worker = JavaProcess(libs, main, [str(props)], work / "worker.log", work)
            try:
                wait_for(lambda: rest.answers() or not worker.alive(), "the worker's REST API")
            except TimeoutError:
                worker.stop()
                raise
            if not worker.alive():
                raise RuntimeError(f"the worker exited:\n{worker.log_tail()}")
            return worker

        worker = start_worker()
        try:
            present = topics(bootstrap)
            policies = {t: topic_config(bootstrap, t, "cleanup.policy") for t in INTERNAL_TOPICS}
            ok = all(t in present for t in INTERNAL_TOPICS) and all(
                p == "compact" for p in policies.values()
            )
            results.append(("internal topics compacted", ok, json.dumps(policies)))
            # The worker's group made the brokers create it, with Kafka's configs.
            offsets = {
                name: topic_config(bootstrap, "__consumer_offsets", name)
                for name in ("cleanup.policy", "segment.bytes")
            }
            ok = offsets == {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}
            results.append(("__consumer_offsets compacted", ok, json.dumps(offsets)))
            rest.call(
                "POST",
                "/connectors",
                {
                    "name": "file-source",
                    "config": {
                        "connector.class": f"{FILE_CONNECTORS}SourceConnector",
                        "tasks.max": "1",
                        "file": str(source_file),
                        "topic": TOPIC,
                        # replog creates no topic on a client's metadata request (Kafka's
                        # auto.create.topics.enable): the worker creates it (KIP-158).
                        "topic.creation.default.replication.factor": "3",
                        "topic.creation.default.partitions": "1",
                    },
                },
            )
            rest.call(
                "POST",
                "/connectors",
                {
                    "name": "file-sink",
                    "config": {
                        "connector.class": f"{FILE_CONNECTORS}SinkConnector",
                        "tasks.max": "1",
                        "file": str(sink_file),
                        "topics": TOPIC,
                    },
                },
            )
            for name in ("file-source", "file-sink"):
                wait_for(lambda n=name: rest.running(n), f"connector {name} RUNNING")  # type: ignore[misc]
            first = [f"line {i}" for i in range(lines)]
            with source_file.open("a") as f:
                f.write("".join(line + "\n" for line in first[:-TRICKLED]))
            for line in first[-TRICKLED:]:  # each in a flush interval of its own
                time.sleep(0.7)
                with source_file.open("a") as f:
                    f.write(line + "\n")
            try:
                wait_for(lambda: len(lines_of(sink_file)) >= lines, "the sink file", 180)
            except TimeoutError as exc:
                results.append(("pipeline", False, f"{exc}: {len(lines_of(sink_file))} lines"))
                return results
            got = lines_of(sink_file)
            results.append(("pipeline", got == first, f"{len(got)} of {lines} lines in order"))
            configs = {
                name: topic_config(bootstrap, INTERNAL_TOPICS[1], name)
                for name in COMPACTED_TOPIC_CONFIGS
            }
            results.append(
                (
                    "worker's topic settings taken",
                    configs == COMPACTED_TOPIC_CONFIGS,
                    f"{INTERNAL_TOPICS[1]}: {json.dumps(configs)}",
                )
            )
            time.sleep(2)  # the last offset commit and status
            results.append(cleaned(bootstrap, "before the restart"))
        finally:
            status = worker.stop()
        second = [f"after restart {i}" for i in range(lines)]
        with source_file.open("a") as f:
            f.write("".join(line + "\n" for line in second))
        worker = start_worker()
        try:
            names = sorted(rest.call("GET", "/connectors"))
            for name in ("file-source", "file-sink"):
                wait_for(lambda n=name: rest.running(n), f"connector {name} RUNNING again")  # type: ignore[misc]
            results.append(
                (
                    "configs restored after restart",
                    names == ["file-sink", "file-source"],
                    f"connectors {names} (first worker exited {status})",
                )
            )
            with contextlib.suppress(TimeoutError):  # the check below says what came
                wait_for(lambda: len(lines_of(sink_file)) >= 2 * lines, "the sink file", 180)
            got = lines_of(sink_file)
            again = len(got) - len(set(got))
            ok = got == first + second
            results.append(
                (
                    "offsets resumed after restart",
                    ok,
                    f"{len(got)} lines, {again} copied twice, {len(set(second) & set(got))} of "
                    f"{lines} new ones",
                )
            )
            results.append(cleaned(bootstrap, "after the restart"))
        finally:
            worker.stop()
    return results


def main(argv: Sequence[str] | None = None) -> int:
    return check_main(
        "connect",
        run,
        __doc__ or "",
        argv,
        lines=200,
        base_port=27600,
        failures=(urllib.error.URLError,),
    )


if __name__ == "__main__":
    sys.exit(main())
