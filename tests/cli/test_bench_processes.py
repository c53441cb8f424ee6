"""`replog bench`'s driver processes, without a cluster: the runner drives a stand-in driver
program (fake_bench_driver.py) over the driver-process protocol. A catch-up run writes its
whole backlog before its consumers start and rates their read; a run with producers and
consumers together drains every acknowledged record; a program that fails says why; samples
survive the trip between processes; the worker's loops send and read what they are told."""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from replog.cli.bench import worker
from replog.cli.bench.processes import PYTHON_WORKER, DriverProcess, run_role
from replog.cli.bench.runner import Target, backlog_shares, run_once
from replog.cli.bench.stats import Samples, read_samples, write_samples
from replog.cli.bench.workload import parse_workload
from replog.errors import BenchSystemError

FAKE = (sys.executable, str(Path(__file__).with_name("fake_bench_driver.py")))
BASE: dict[str, Any] = {
    "name": "fake",
    "topics": 2,
    "partitionsPerTopic": 2,
    "messageSize": 1000,
    "producersPerTopic": 1,
    "subscriptionsPerTopic": 1,
    "consumerPerSubscription": 1,
    "producerRate": "max",
}


class FakeCluster:
    def __init__(self, directory: Path, driver: str = "fake") -> None:
        self.directory = directory
        directory.mkdir()
        self.created: list[str] = []
        self.deleted: list[str] = []
        self.target = Target(
            driver=driver,
            servers=str(directory),
            program=FAKE,
            create_topics=lambda names, _partitions: self.created.extend(names),
            delete_topics=self.deleted.extend,
            server_pids=lambda: [os.getpid()],  # this process stands for the servers
        )


def test_a_catch_up_run_reads_the_whole_backlog_after_writing_it(tmp_path: Path) -> None:
    cluster = FakeCluster(tmp_path / "cluster")
    workload = parse_workload({**BASE, "consumerBacklogSizeGB": 0.0001, "testDurationSeconds": 30})
    result = run_once(cluster.target, workload, work_dir=str(tmp_path / "work"))
    catch_up = result["catch_up"]
    # ceil(0.0001 GiB / 1000 B) = 108 records, split between the two topics' producers.
    assert catch_up["records"] == catch_up["expected"] == 108 == result["produce"]["records"]
    assert catch_up["seconds"] > 0 and catch_up["mb_per_s"] > 0
    assert catch_up["started_at_s"] > 0  # the consumers started after the writing ended
    assert catch_up["server_cpu_cores"] >= 0 and result["server_cpu_cores"] >= 0
    assert result["requests"]["produce"] == 2 * 5  # the fake counts one request per 10 records
    assert [p["name"] for p in result["driver_processes"]] == [
        "producer-0",
        "producer-1",
        "consumer-0",
        "consumer-1",
    ]
    assert cluster.created == cluster.deleted == result["topics"]
    assert os.listdir(tmp_path / "work") == []  # the run's scratch directory is gone


def test_producers_and_consumers_together_drain_every_acknowledged_record(tmp_path: Path) -> None:
    cluster = FakeCluster(tmp_path / "cluster")
    workload = parse_workload(
        {**BASE, "producerRate": 100, "testDurationSeconds": 1, "idlePartitions": 50}
    )
    result = run_once(cluster.target, workload, work_dir=str(tmp_path / "work"))
    # Two phases: the run's two topics alone, then two fresh ones with the idle topic beside
    # them; everything went after the run.
    prefix = result["topics"][0].split("-0-")[0]
    assert cluster.created == [
        f"{prefix}-0",
        f"{prefix}-1",
        *result["topics"],
        f"{prefix}-idle",
    ]
    assert result["topics"] == [f"{prefix}-0-beside-idle", f"{prefix}-1-beside-idle"]
    assert cluster.deleted == cluster.created and result["idle_partitions"] == 50
    assert result["idle"]["partitions"] == 50
    assert 0 <= result["server_cpu_cores"] < 4
    assert sum(result["timeline"]["produced_per_s"]) == 100
    assert sum(result["timeline"]["consumed_per_s"]) == 100
    assert "catch_up" not in result and result["produce"]["errors"] == 0
    assert result["driver_cpus"] == "" and not result["client_bound"]


def test_the_phase_beside_the_idle_topic_starts_once_every_replica_of_it_is_led(
    tmp_path: Path,
) -> None:
    """The idle topic goes through the system's `create_led` (every replica created and led,
    as a controller run's end to end), not the bare CreateTopics the busy topics take; the
    wait is recorded and the second phase starts after it."""
    cluster = FakeCluster(tmp_path / "cluster")
    calls: list[str] = []

    def create_led(names: list[str], partitions: int, per_request: int) -> tuple[float, float]:
        calls.append(f"create_led {names} x{partitions} by {per_request}")
        time.sleep(0.6)  # the stand-in settles 0.2 s, then its replicas take 0.4 s
        calls.append("every replica led")
        return 0.1, 0.4  # answered 0.1 s after its first request, every replica led at 0.4

    def create_topics(names: list[str], partitions: int) -> None:
        calls.append(f"create {names}")
        cluster.created.extend(names)

    target = dataclasses.replace(
        cluster.target,
        create_led=create_led,
        create_topics=create_topics,
        server_pids=lambda: (calls.append("servers' CPU read"), [os.getpid()])[1],
    )
    workload = parse_workload(
        {
            **BASE,
            "topics": 1,
            "producerRate": 100,
            "warmupDurationSeconds": 0,
            "testDurationSeconds": 1,
            "idlePartitions": 50,
        }
    )
    result = run_once(target, workload, work_dir=str(tmp_path / "work"))
    prefix = result["topics"][0].split("-0-")[0]
    beside = calls.index(f"create {result['topics']}")
    # The busy topic of the second phase, then the idle one until every replica is led, then
    # the phase (its servers' CPU is first read at its start).
    assert calls[beside + 1 : beside + 4] == [
        f"create_led ['{prefix}-idle'] x50 by 1",
        "every replica led",
        "servers' CPU read",
    ]
    idle = result["idle"]
    # The wait is the system's own figure: what it did before its first request is not in it.
    assert idle["idle_answered_s"] == 0.1 and idle["idle_led_wait_s"] == 0.3
    assert f"{prefix}-idle" in cluster.deleted  # made by create_led, deleted after the run


def test_a_metadata_run_counts_requests_and_deletes_every_topic_it_may_have_made(
    tmp_path: Path,
) -> None:
    cluster = FakeCluster(tmp_path / "cluster")
    workload = parse_workload(
        {
            "name": "m",
            "metadataClients": 2,
            "topicsPerRequest": 15,
            "partitionsPerTopic": 1,
            "testDurationSeconds": 1,
        }
    )
    result = run_once(cluster.target, workload, work_dir=str(tmp_path / "work"))
    assert result["metadata"]["clients"] == 2 and result["metadata"]["errors"] == 0
    assert result["requests"]["produce"] == 40  # 20 requests from each admin process
    assert cluster.created == []  # a metadata run makes its topics itself
    # 2 x 20 requests x 15 topics, deleted 500 a request.
    assert len(cluster.deleted) == 600 and len(set(cluster.deleted)) == 600
    assert cluster.deleted[0].endswith("-m0-0") and cluster.deleted[-1].endswith("-m1-299")


def test_a_driver_program_that_fails_is_named_with_its_stderr(tmp_path: Path) -> None:
    cluster = FakeCluster(tmp_path / "cluster", driver="broken")
    workload = parse_workload({**BASE, "testDurationSeconds": 1})
    with pytest.raises(BenchSystemError, match=r"consumer-0 did not get ready.*cannot reach"):
        run_once(cluster.target, workload, work_dir=str(tmp_path / "work"))
    assert cluster.deleted == cluster.created  # the topics go whatever happens


def test_a_one_shot_role_that_fails_says_so(tmp_path: Path) -> None:
    with pytest.raises(BenchSystemError, match=r"create failed.*cannot reach"):
        run_role(FAKE, {"role": "create", "driver": "broken"}, str(tmp_path), 30)


def test_a_driver_process_runs_under_taskset_when_pinned(tmp_path: Path) -> None:
    cpu = str(min(os.sched_getaffinity(0)))
    probe = (
        sys.executable,
        "-c",
        "import os, sys; sys.stdin.readline(); "
        "print(*sorted(os.sched_getaffinity(0)), file=sys.stderr, flush=True); "
        "print('ready', flush=True)",
    )
    process = DriverProcess("probe", probe, {}, str(tmp_path), cpus=cpu)
    process.wait_ready(deadline=float("inf"))
    process.kill()
    assert Path(process.stderr_path).read_text().split() == [cpu]


def test_samples_survive_the_trip_between_processes(tmp_path: Path) -> None:
    samples = Samples()
    for i in range(5):
        samples.add(i / 10, i * 1.5)
    path = str(tmp_path / "s")
    write_samples(path, samples)
    back = read_samples(path, errors=2, first_error="boom")
    assert list(back.sent_s) == list(samples.sent_s)
    assert list(back.latency_ms) == list(samples.latency_ms)
    assert (back.errors, back.first_error) == (2, "boom")
    assert backlog_shares(10, 3) == [4, 3, 3]


class _Producer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | None, int]] = []

    def send(self, topic: str, key: bytes | None, value: bytes, done: Any) -> None:
        self.sent.append((topic, key, len(value)))
        done(None if len(self.sent) % 10 else "full")  # every tenth fails

    def service(self) -> None:
        pass

    def flush(self, timeout_s: float) -> None:
        pass

    def requests(self) -> int:
        return 7

    def close(self) -> None:
        pass


def test_the_worker_sends_a_backlog_of_exactly_its_records() -> None:
    producer = _Producer()
    task = {
        "message_size": 64,
        "index": 0,
        "key_distributor": "KEY_ROUND_ROBIN",
        "rate": 0,
        "records": 30,
        "run_s": 60,
        "topic": "t",
    }
    samples, fields = worker.produce(task, producer, start_ns=time.time_ns())
    assert len(producer.sent) == 30 and {s[2] for s in producer.sent} == {64}
    assert producer.sent[0][1] == b"key-0-0" and producer.sent[1][1] == b"key-0-1"
    assert len(samples.sent_s) == 27 and samples.errors == 3
    assert fields["requests"] == 7


def test_the_worker_reads_until_told_to_stop() -> None:
    stop = threading.Event()
    batches = [[worker.SEND_TIME.pack(1) + b"x"] * 3, []]

    class Consumer:
        def poll(self, timeout_s: float) -> list[bytes]:
            if not batches:
                stop.set()
                return []
            return batches.pop(0)

        def close(self) -> None:
            pass

    lines: list[str] = []

    class Out:
        def say(self, line: str) -> None:
            lines.append(line)

    samples, fields = worker.consume(Consumer(), 0, stop, Out())  # type: ignore[arg-type]
    assert len(samples.sent_s) == 3 and fields["last_receive_ns"] > 0
    assert lines and lines[0].startswith("n ")
    assert PYTHON_WORKER[1:] == ("-m", "replog.cli.bench.worker")


def test_the_worker_sends_create_topics_requests_until_the_run_ends() -> None:
    made: list[list[str]] = []

    class Admin:
        def create_topics(self, names: Any, partitions: int) -> None:
            made.append(list(names))
            if len(made) % 3 == 0:
                raise RuntimeError("TOPIC_ALREADY_EXISTS")
            time.sleep(0.01)

        def close(self) -> None:
            pass

    task = {"topics_per_request": 2, "partitions": 1, "prefix": "p", "run_s": 0.3}
    samples, fields = worker.create_topics(task, Admin(), start_ns=time.time_ns())
    assert fields["requests"] == len(made) >= 5
    assert made[0] == ["p-0", "p-1"] and made[1] == ["p-2", "p-3"]
    assert samples.errors == len(made) // 3 and samples.first_error.endswith("EXISTS")
    assert len(samples.sent_s) == len(made) - samples.errors
    assert all(latency >= 10 for latency in samples.latency_ms)
