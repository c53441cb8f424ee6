"""One benchmark run of a workload against a running system, and its JSON result.

A run creates the workload's topics afresh (`bench-<run id>-<i>`) and starts one driver
process per producer and per consumer (`processes`: replog's and confluent-kafka's Python
clients each in a process of its own, so no two share a GIL; JetStream's compiled driver).
Consumers are assigned their share of a subscription's partitions and read from the earliest
offset; producers send for warm-up + duration at the workload's rate (or unthrottled), then
flush; consumers go on until they have received every acknowledged record (or `DRAIN_S`
passed without a new one). Every record's value starts with its send time (ns since the epoch,
8 bytes, big-endian), from which consumers measure end-to-end latency; producers measure from
just before `send` to the delivery callback.

A metadata run (`metadataClients`) starts no producers or consumers but that many admin
processes, each sending CreateTopics requests one after another (JetStream's: a request's
stream creates, `jetstream`); its "metadata" gives the requests answered per second in the
measured window and their latencies (the "produce" figures, one sample a request).

A catch-up run (`consumerBacklogSizeGB`) has two phases: the producers write the backlog
(unthrottled unless the workload gives a rate) and flush, and only then do the consumers start,
read it from the start, and the result's "catch_up" gives its rate: the backlog's bytes over
the time from the consumers' start to the last record's receipt. The test duration bounds the
writing and the reading each.

With the workload's `idlePartitions`, a run has two phases on the same cluster: the workload
alone (the baseline), then on fresh topics again with a topic of that many partitions that
nobody reads or writes beside them. The second phase starts once every replica of the idle
topic is created and every partition led (`_create_idle`, as a controller run's end to end):
a phase that began at the CreateTopics answer measured the systems still making the
partitions' logs. The result is the second phase's, and its "idle" gives the servers' CPU and
the busy topic's p99 latencies of both phases, the CPU cores the idle partitions cost per
1,000 of them (`idle_figures`), and how long the wait for the idle topic took. (A catch-up run
has one phase, the idle topic beside it, made the same way.) Every result gives the server
processes' CPU (`server_cpu_cores`) over the measured window, from the warm-up's end until
the producers finished (and, for a catch-up, while the consumers read).

A transactional run (`recordsPerTransaction`) has two phases on the same cluster, each on
fresh topics: the workload as plain produce (the baseline), then with each producer
committing a transaction every that many records and the consumers reading read_committed.
The result is the transactional phase's, and its "transactions" gives the commits' latency
(each `commit_transaction` call, as the client sees it, of those begun in the measured
window), the MB/s of records whose transaction committed in the window, the baseline's MB/s
and the ratio of the two (`transaction_figures`).

A controller run (`createPartitions`) starts no driver processes: the harness creates the
partitions through the system (`Target.create_led`: CreateTopics requests one after another,
then until every replica is created and led) and, with `failoverPartitions`, grows the image
to that size and SIGKILLs the active controller (`Target.fail_controller`), then restarts it.
"controller" in its result gives the seconds until the last answer and until every replica
was led, and the failover's seconds until a survivor answered a CreateTopics.

Rules: the result records every driver process's CPU use and their sum (`driver_cpu_cores`,
over the time the producers ran), and calls a run `client_bound` when one driver process kept a
whole core busy (a Python process's ceiling: its GIL) or the driver processes together used
`CLIENT_BOUND_SHARE` of the cores they may run on. The run's topics are deleted after it
(a 2 GiB backlog times three replicas per run would fill a disk). The machine's load average
before and after is recorded too: on a shared machine the figures are noisy.
"""

from __future__ import annotations

import math
import os
import platform
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from replog.cli.bench.drivers import REPLICATION_FACTOR
from replog.cli.bench.pinning import parse_cpus
from replog.cli.bench.processes import DriverProcess, DriverResult
from replog.cli.bench.server_cpu import cores_between, cpu_seconds
from replog.cli.bench.stats import MB, Samples, run_result, summarize, unavailability
from replog.cli.bench.workload import Workload
from replog.errors import BenchSystemError

DRAIN_S = 10.0  # consumers stop after this long without a record once producers are done
FLUSH_S = 60.0
POLL_S = 0.1
READY_S = 60.0
DELETE_BATCH = 500  # topics per DeleteTopics request after a run
CLIENT_BOUND_CORES = 0.9  # one driver process this busy: its client is the limit
CLIENT_BOUND_SHARE = 0.9  # of the cores the driver processes may run on
RESULT_FORMAT = 2
PUBLISH_WINDOW = 4096  # a JetStream producer's asynchronous publishes awaiting acknowledgement
NODES = 3  # every system runs 3 nodes, each leading about a third of the partitions


def stream_name(topic: str, partition: int) -> str:
    """The JetStream stream standing for a partition (JetStream has no partitions)."""
    return f"{topic}-p{partition}"


def assignments(topics: list[str], workload: Workload) -> list[list[tuple[str, int]]]:
    """Each consumer's partitions: per topic and subscription, consumer j takes the partitions
    p with p % consumerPerSubscription == j (a consumer with none is left out)."""
    consumers = []
    for topic in topics:
        for _subscription in range(workload.subscriptions_per_topic):
            for j in range(workload.consumers_per_subscription):
                share = [
                    (topic, p)
                    for p in range(workload.partitions_per_topic)
                    if p % workload.consumers_per_subscription == j
                ]
                if share:
                    consumers.append(share)
    return consumers


def backlog_shares(records: int, producers: int) -> list[int]:
    """The backlog's records split among the producers (the first ones take the remainder)."""
    base, extra = divmod(records, producers)
    return [base + (1 if i < extra else 0) for i in range(producers)]


@dataclass(frozen=True, slots=True)
class Target:
    """What a run drives: the system's driver (a name of drivers.DRIVERS, or "jetstream"), its
    bootstrap servers, the driver program (`processes`' protocol), and its topic hooks."""

    driver: str
    servers: str
    program: Sequence[str]
    create_topics: Callable[[list[str], int], None]
    delete_topics: Callable[[list[str]], None]
    kill_leader: Callable[[str], int] | None = None
    server_pids: Callable[[], list[int]] = list
    # A controller run's (systems.ControllerSystem): None for a system without a controller.
    create_led: Callable[[list[str], int, int], tuple[float, float]] | None = None
    fail_controller: Callable[[str], tuple[int, Any]] | None = None
    restart_killed: Callable[[], None] = lambda: None


class _Run:
    def __init__(self, target: Target, workload: Workload, scratch: str, cpus: str | None) -> None:
        self.target = target
        self.workload = workload
        self.scratch = scratch
        self.cpus = cpus
        self.started: list[DriverProcess] = []
        run_id = self.run_id = uuid.uuid4().hex[:8]
        self.topics = [f"bench-{run_id}-{i}" for i in range(workload.topics)]
        self.idle_topics = [f"bench-{run_id}-idle"] if workload.idle_partitions else []
        self.metadata_topics: list[str] = []  # what a metadata run's admins may have made
        self.made: list[str] = []  # every topic the harness created (or began to)

    def create(self, names: list[str], partitions: int) -> None:
        self.made += names  # before the request: deleted after the run even if it failed
        self.target.create_topics(names, partitions)

    def server_cpu(self) -> tuple[dict[int, float], float]:
        """A reading of the servers' CPU seconds, and when it was taken (monotonic)."""
        return cpu_seconds(self.target.server_pids()), time.monotonic()

    def server_cores(self, since: tuple[dict[int, float], float]) -> float:
        before, at = since
        after, now = self.server_cpu()
        return round(cores_between(before, after, now - at), 3)

    def _task(self, role: str, index: int, **fields: Any) -> dict[str, Any]:
        w = self.workload
        return {
            "role": role,
            "driver": self.target.driver,
            "servers": self.target.servers,
            "index": index,
            "message_size": w.message_size,
            "replicas": REPLICATION_FACTOR,
            **fields,
        }

    def _start(self, name: str, task: dict[str, Any]) -> DriverProcess:
        process = DriverProcess(name, self.target.program, task, self.scratch, self.cpus)
        self.started.append(process)
        return process

    def producers(
        self, backlog: Sequence[int] | None, transactional: bool = False
    ) -> list[DriverProcess]:
        w = self.workload
        started = []
        for index, topic in enumerate(t for t in self.topics for _ in range(w.producers_per_topic)):
            txn = (
                {
                    "records_per_transaction": w.records_per_transaction,
                    "transactional_id": f"bench-{self.run_id}-{index}",
                }
                if transactional
                else {}
            )
            task = self._task(
                "produce",
                index,
                topic=topic,
                streams=[stream_name(topic, p) for p in range(w.partitions_per_topic)],
                rate=w.rate_per_producer(),
                # A backlog's writing stops at its size, or at the test duration.
                run_s=w.warmup_s + w.duration_s,
                records=backlog[index] if backlog else 0,
                key_distributor=w.key_distributor,
                producer_config=dict(w.producer_config),
                window=PUBLISH_WINDOW,
                **txn,
            )
            started.append(self._start(f"producer-{index}", task))
        return started

    def consumers(self, read_committed: bool = False) -> list[DriverProcess]:
        started = []
        for index, share in enumerate(assignments(self.topics, self.workload)):
            task = self._task(
                "consume",
                index,
                assigned=share,
                streams=[stream_name(t, p) for t, p in share],
                read_committed=read_committed,
            )
            started.append(self._start(f"consumer-{index}", task))
        return started

    def admins(self) -> list[DriverProcess]:
        w = self.workload
        return [
            self._start(
                f"admin-{index}",
                self._task(
                    "admin",
                    index,
                    prefix=self.admin_prefix(index),
                    partitions=w.partitions_per_topic,
                    topics_per_request=w.topics_per_request,
                    run_s=w.warmup_s + w.duration_s,
                ),
            )
            for index in range(w.metadata_clients)
        ]

    def admin_prefix(self, index: int) -> str:
        return f"bench-{self.run_id}-m{index}"

    def kill_all(self) -> None:
        for process in self.started:
            process.kill()


def _go(processes: Sequence[DriverProcess], since_ns: int | None = None) -> tuple[int, float]:
    """Wait until every process is ready, then start them all; the start (wall ns, monotonic).
    The processes count their samples' send times from `since_ns` (default: this start)."""
    deadline = time.monotonic() + READY_S
    for process in processes:
        process.wait_ready(deadline)
    start_ns, start_mono = time.time_ns(), time.monotonic()
    for process in processes:
        process.go(start_ns if since_ns is None else since_ns)
    return start_ns, start_mono


def _drain(consumers: Sequence[DriverProcess], expected: int) -> None:
    """Wait until the consumers received `expected` records, or none came for DRAIN_S (or
    FLUSH_S passed), then stop them."""
    deadline = time.monotonic() + FLUSH_S
    seen, last_progress = -1, time.monotonic()
    while time.monotonic() < deadline:
        received = sum(c.received for c in consumers)
        if received >= expected or all(c.finished for c in consumers):
            break
        if received != seen:
            seen, last_progress = received, time.monotonic()
        elif time.monotonic() - last_progress > DRAIN_S:
            break
        time.sleep(POLL_S)
    for consumer in consumers:
        consumer.stop()


def _merged(results: Sequence[DriverResult]) -> Samples:
    merged = Samples()
    for result in results:
        merged.extend(result.samples)
    return merged


def run_once(
    target: Target, workload: Workload, *, work_dir: str, driver_cpus: str | None = None
) -> dict[str, Any]:
    """Run `workload` once against `target`; the run's JSON result (without system fields).
    With the workload's `killLeaderAtSeconds`, `target.kill_leader(topic)` SIGKILLs the leader
    of the first topic's partition 0 then (returning its node id), and the result has
    "failover". `driver_cpus`: the driver processes run under `taskset -c` with it."""
    os.makedirs(work_dir, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="run-", dir=work_dir)
    run = _Run(target, workload, scratch, driver_cpus)
    try:
        if run.topics:  # metadata and controller runs make their own
            run.create(run.topics, workload.partitions_per_topic)
        if workload.controller:
            result = _run_controller(run)
        elif workload.metadata_clients:
            result = _run_metadata(run)
        elif workload.backlog_gib is not None:
            idle = _create_idle(run) if run.idle_topics else None
            result = _run_catch_up(run)
            if idle is not None:
                result["idle"] = {"partitions": workload.idle_partitions, **idle}
        elif run.idle_topics:
            result = _run_idle(run)
        elif workload.records_per_transaction:
            result = _run_transactional(run)
        else:
            result = _run_together(run)
    finally:
        run.kill_all()
        shutil.rmtree(scratch, ignore_errors=True)
        made = run.made + run.metadata_topics
        for first in range(0, len(made), DELETE_BATCH):
            target.delete_topics(made[first : first + DELETE_BATCH])
    result["topics"] = run.topics
    result["idle_partitions"] = workload.idle_partitions
    result["driver"] = target.driver
    return result


def _run_together(run: _Run, transactional: bool = False) -> dict[str, Any]:
    workload, target = run.workload, run.target
    consumers = run.consumers(read_committed=transactional)
    producers = run.producers(None, transactional)
    load_before = os.getloadavg()
    _start_ns, start_mono = _go([*consumers, *producers])
    server_at_go = run.server_cpu()
    # The servers' CPU counts from the warm-up's end: a cluster settling after its topics were
    # made (an idle run's thousands of partitions) would otherwise count in the window.
    window_start: list[tuple[dict[int, float], float]] = []
    warmed = threading.Timer(workload.warmup_s, lambda: window_start.append(run.server_cpu()))
    warmed.daemon = True
    if workload.warmup_s:
        warmed.start()
    killed: dict[str, Any] = {}
    killer = None
    if workload.kill_leader_at_s is not None and target.kill_leader is not None:
        kill_leader = target.kill_leader

        def kill() -> None:
            killed["at_s"] = time.monotonic() - start_mono
            try:
                killed["node"] = kill_leader(run.topics[0])
            except Exception as exc:
                killed["error"] = f"{type(exc).__name__}: {exc}"

        killer = threading.Timer(workload.kill_leader_at_s, kill)
        killer.daemon = True
        killer.start()
    run_s = workload.warmup_s + workload.duration_s
    produced_results = [p.result(run_s + 2 * FLUSH_S) for p in producers]
    if killer is not None:
        killer.join()
    produced_s = time.monotonic() - start_mono
    warmed.cancel()
    server_cores = run.server_cores(window_start[0] if window_start else server_at_go)
    produced = _merged(produced_results)
    _drain(consumers, len(produced.sent_s) * workload.subscriptions_per_topic)
    consumed_results = [c.result(FLUSH_S) for c in consumers]
    result = run_result(
        produced,
        _merged(consumed_results),
        warmup_s=workload.warmup_s,
        duration_s=workload.duration_s,
        message_size=workload.message_size,
        run_seconds=int(produced_s) + 1,
    )
    if killed:
        result["failover"] = {
            "killed_node": killed.get("node"),
            "at_s": round(killed["at_s"], 3),
            "error": killed.get("error", ""),
            "unavailable_s": round(unavailability(produced, from_s=killed["at_s"], to_s=run_s), 3),
            "end_to_end_unavailable_s": round(
                unavailability(_merged(consumed_results), from_s=killed["at_s"], to_s=run_s), 3
            ),
        }
    if transactional:
        commits = Samples()
        for produced_result in produced_results:
            commits.extend(produced_result.commits)
        result["transactions"] = {
            **commit_figures(commits, workload),
            # Over the whole phase: read_committed receives every committed record.
            "records_acknowledged": len(produced.sent_s),
            "records_received": sum(len(c.samples.sent_s) for c in consumed_results),
        }
    span_s = time.monotonic() - start_mono
    result.update(
        _driver_fields(produced_results, consumed_results, produced_s, span_s, run, load_before)
    )
    return {**result, "server_cpu_cores": server_cores}


def _run_transactional(run: _Run) -> dict[str, Any]:
    """The workload as plain produce, then transactional on fresh topics (the module
    docstring)."""
    without = _run_together(run)
    run.topics = [f"bench-{run.run_id}-{i}-txn" for i in range(run.workload.topics)]
    run.create(run.topics, run.workload.partitions_per_topic)
    result = _run_together(run, transactional=True)
    result["transactions"].update(transaction_figures(without, result))
    return result


def commit_figures(commits: Samples, workload: Workload) -> dict[str, Any]:
    """A transactional phase's commits (one sample each: begun at, took ms): the latency of
    those begun in the measured window, and the MB/s of the records of those that ended in
    it (each commits `recordsPerTransaction` records; the last, shorter one of each producer
    ends after the window). A failed commit ends its producer's sending and is counted with
    the produce errors."""
    per_txn = workload.records_per_transaction
    summary = summarize(
        commits,
        warmup_s=workload.warmup_s,
        duration_s=workload.duration_s,
        message_size=per_txn * workload.message_size,
    )
    return {
        "records_per_transaction": per_txn,
        "commits": summary["records"],
        "commits_per_s": summary["records_per_s"],
        "committed_mb_per_s": summary["mb_per_s"],
        "commit_latency_ms": summary["latency_ms"],
    }


def transaction_figures(without: dict[str, Any], beside: dict[str, Any]) -> dict[str, Any]:
    """The transactional phase against its plain baseline (results of both phases): the
    baseline's MB/s and produce p99, and the transactional MB/s (committed) over the
    baseline's, the overhead as a ratio (0.0 when the baseline measured nothing)."""
    plain = float(without["produce"]["mb_per_s"])
    committed = float(beside["transactions"]["committed_mb_per_s"])
    return {
        "plain_mb_per_s": plain,
        "plain_produce_p99_ms": without["produce"]["latency_ms"]["p99"],
        "plain_end_to_end_p99_ms": without["end_to_end"]["latency_ms"]["p99"],
        "mb_per_s_ratio": round(committed / plain, 4) if plain > 0 else 0.0,
        "plain_load_average": without["load_average"],
    }


def _run_idle(run: _Run) -> dict[str, Any]:
    """The workload alone, then on fresh topics beside the idle topic (the module docstring)."""
    workload = run.workload
    without = _run_together(run)
    run.topics = [f"bench-{run.run_id}-{i}-beside-idle" for i in range(workload.topics)]
    run.create(run.topics, workload.partitions_per_topic)
    created = _create_idle(run)
    result = _run_together(run)
    result["idle"] = {**idle_figures(without, result, workload.idle_partitions), **created}
    return result


def _create_idle(run: _Run) -> dict[str, Any]:
    """Create the idle topic and wait until every replica of it is created and every partition
    led (`Target.create_led`, as a controller run's end to end), so that a phase beside it
    measures idle partitions and not their creation's aftermath; the seconds until its
    CreateTopics was answered (`idle_answered_s`) and from then until every replica was led
    (`idle_led_wait_s`). A system without `create_led` (JetStream: a stream's create is
    answered by its new leader) is only created: its result has no wait."""
    names, partitions = run.idle_topics, run.workload.idle_partitions
    if run.target.create_led is None:
        began = time.monotonic()
        run.create(names, partitions)
        return {"idle_answered_s": round(time.monotonic() - began, 3)}
    run.made += names  # before the request: deleted after the run even if it failed
    answered_s, led_s = run.target.create_led(names, partitions, len(names))
    return {
        "idle_answered_s": round(answered_s, 3),
        "idle_led_wait_s": round(max(0.0, led_s - answered_s), 3),
    }


def idle_figures(
    without: dict[str, Any], beside: dict[str, Any], partitions: int
) -> dict[str, Any]:
    """What `partitions` idle partitions cost, from a run's two phases (results without and
    beside them): the servers' CPU of each, the difference per 1,000 idle partitions (noise
    can make it negative on a shared machine), and the busy topic's p99 latencies of each."""
    cores_without = float(without["server_cpu_cores"])
    cores_beside = float(beside["server_cpu_cores"])
    return {
        "partitions": partitions,
        "server_cpu_cores_without": cores_without,
        "server_cpu_cores_with": cores_beside,
        "cores_per_1000": round((cores_beside - cores_without) * 1000 / partitions, 4),
        "end_to_end_p99_ms_without": without["end_to_end"]["latency_ms"]["p99"],
        "end_to_end_p99_ms_with": beside["end_to_end"]["latency_ms"]["p99"],
        "produce_p99_ms_without": without["produce"]["latency_ms"]["p99"],
        "produce_p99_ms_with": beside["produce"]["latency_ms"]["p99"],
        "load_average_without": without["load_average"],
    }


def _run_controller(run: _Run) -> dict[str, Any]:
    """Create, then fail the controller over (the module docstring)."""
    workload, target = run.workload, run.target
    if target.create_led is None or target.fail_controller is None:
        raise BenchSystemError(f"{target.driver}: this system has no controller run")
    per_topic, per_request = workload.partitions_per_topic, workload.topics_per_request
    load_before = os.getloadavg()
    names = [f"bench-{run.run_id}-c{i}" for i in range(workload.create_partitions // per_topic)]
    run.made += names
    server_before = run.server_cpu()
    answered_s, created_s = target.create_led(names, per_topic, per_request)
    create_cores = run.server_cores(server_before)
    controller: dict[str, Any] = {
        "partitions": workload.create_partitions,
        "topics": len(names),
        "topics_per_request": per_request,
        "answered_s": round(answered_s, 3),
        "created_s": round(created_s, 3),
        "partitions_per_s": workload.create_partitions / created_s,
        "server_cpu_cores": create_cores,
    }
    if workload.failover_partitions:
        missing = workload.failover_partitions - workload.create_partitions
        fill = [f"bench-{run.run_id}-f{i}" for i in range(math.ceil(missing / per_topic))]
        run.made += fill
        if fill:
            target.create_led(fill, per_topic, per_request)
        probe = f"bench-{run.run_id}-probe"
        run.made.append(probe)
        killed, timed = target.fail_controller(probe)
        controller["failover"] = {
            "image_partitions": workload.create_partitions + len(fill) * per_topic,
            "killed_node": killed,
            "seconds": round(timed.seconds, 3),
            "new_controller": timed.new_controller,
            "known_s": None if timed.known_s is None else round(timed.known_s, 3),
        }
        try:
            target.restart_killed()  # before the run's topics are deleted
        except BenchSystemError as exc:
            # The failover was measured: keep it, and say the node did not come back.
            controller["failover"]["restart_error"] = str(exc)
    result = run_result(
        Samples(), Samples(), warmup_s=0.0, duration_s=1.0, message_size=0, run_seconds=1
    )
    result["controller"] = controller
    result.update(_driver_fields([], [], created_s, created_s, run, load_before))
    return {**result, "server_cpu_cores": create_cores}


def _run_catch_up(run: _Run) -> dict[str, Any]:
    workload = run.workload
    load_before = os.getloadavg()
    producers = run.producers(backlog_shares(workload.backlog_records, workload.producers))
    start_ns, start_mono = _go(producers)
    server_at_go = run.server_cpu()
    produced_results = [p.result(workload.duration_s + 2 * FLUSH_S) for p in producers]
    produced_s = time.monotonic() - start_mono
    server_cores = run.server_cores(server_at_go)
    produced = _merged(produced_results)
    consumers = run.consumers()
    read_start_ns, read_start_mono = _go(consumers, since_ns=start_ns)
    server_at_read = run.server_cpu()
    expected = len(produced.sent_s) * workload.subscriptions_per_topic
    deadline = read_start_mono + workload.duration_s
    while time.monotonic() < deadline and sum(c.received for c in consumers) < expected:
        if all(c.finished for c in consumers):
            break
        time.sleep(POLL_S)
    for consumer in consumers:
        consumer.stop()
    read_server_cores = run.server_cores(server_at_read)
    consumed_results = [c.result(FLUSH_S) for c in consumers]
    consumed = _merged(consumed_results)
    last_ns = max((c.last_receive_ns for c in consumed_results), default=0)
    read_s = max((last_ns - read_start_ns) / 1e9, 1e-9)
    total_s = time.monotonic() - start_mono
    result = run_result(
        produced,
        consumed,
        warmup_s=0.0,
        duration_s=produced_s,
        message_size=workload.message_size,
        run_seconds=int(total_s) + 1,
    )
    # End-to-end figures count receipts over the whole run: they all come after the writing.
    result["end_to_end"] = summarize(
        consumed, warmup_s=0.0, duration_s=total_s, message_size=workload.message_size
    )
    records = len(consumed.sent_s)
    result["catch_up"] = {
        "records": records,
        "expected": expected,
        "seconds": round(read_s, 3),
        "records_per_s": records / read_s,
        "mb_per_s": records * workload.message_size / MB / read_s,
        "started_at_s": round(read_start_mono - start_mono, 3),
        "server_cpu_cores": read_server_cores,
    }
    result.update(
        _driver_fields(produced_results, consumed_results, produced_s, total_s, run, load_before)
    )
    return {**result, "server_cpu_cores": server_cores}


def _run_metadata(run: _Run) -> dict[str, Any]:
    workload = run.workload
    load_before = os.getloadavg()
    admins = run.admins()
    _start_ns, start_mono = _go(admins)
    server_at_go = run.server_cpu()
    run_s = workload.warmup_s + workload.duration_s
    answered_results = []
    for index, admin in enumerate(admins):
        answered = admin.result(run_s + 2 * FLUSH_S)
        answered_results.append(answered)
        count = answered.requests * workload.topics_per_request
        run.metadata_topics += [f"{run.admin_prefix(index)}-{n}" for n in range(count)]
    ran_s = time.monotonic() - start_mono
    server_cores = run.server_cores(server_at_go)
    result = run_result(
        _merged(answered_results),
        Samples(),
        warmup_s=workload.warmup_s,
        duration_s=workload.duration_s,
        message_size=0,
        run_seconds=int(ran_s) + 1,
    )
    answered_per_s = result["produce"]["records_per_s"]
    topics_per_s = answered_per_s * workload.topics_per_request
    result["metadata"] = {
        "clients": workload.metadata_clients,
        "requests_per_s": answered_per_s,
        "topics_per_s": topics_per_s,
        "partitions_per_s": topics_per_s * workload.partitions_per_topic,
        "latency_ms": result["produce"]["latency_ms"],
        "errors": result["produce"]["errors"],
        "first_error": result["produce"]["first_error"],
    }
    result.update(_driver_fields(answered_results, [], ran_s, ran_s, run, load_before))
    return {**result, "server_cpu_cores": server_cores}


def _driver_fields(
    produced: Sequence[DriverResult],
    consumed: Sequence[DriverResult],
    produced_s: float,
    span_s: float,
    run: _Run,
    load_before: tuple[float, float, float],
) -> dict[str, Any]:
    """The driver processes' CPU (summed over them, as cores over the run's span), the
    client-bound flag, the produce requests they sent, the CPUs they were pinned to."""
    processes = [*produced, *consumed]
    cores = sum(p.cpu_s for p in processes) / max(span_s, 1e-9)
    cpus = run.cpus
    allowed = len(parse_cpus(cpus)) if cpus else (os.cpu_count() or 1)
    busiest = max((p.cores for p in processes), default=0.0)
    requests = sum(p.requests for p in produced)
    per_s = requests / produced_s if produced_s > 0 else 0.0
    return {
        "driver_cpu_cores": round(cores, 3),
        "driver_processes": [
            {"name": p.name, "cpu_s": round(p.cpu_s, 3), "cores": round(p.cores, 3)}
            for p in processes
        ],
        "client_bound": busiest >= CLIENT_BOUND_CORES or cores >= CLIENT_BOUND_SHARE * allowed,
        # Counted by the clients: librdkafka's statistics, replog's producer metrics, one a
        # record for JetStream (a publish is a request); spread over the nodes the leaders are.
        "requests": {
            "produce": requests,
            "produce_per_s": per_s,
            "per_broker_per_s": per_s / NODES,
        },
        "driver_cpus": cpus or "",
        "load_average": {
            "before": [round(x, 2) for x in load_before],
            "after": [round(x, 2) for x in os.getloadavg()],
        },
    }


def machine() -> dict[str, Any]:
    """What the report records of the machine (every run's JSON has it)."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if "model name" in line), "")
    except OSError:
        pass
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cores": os.cpu_count(),
        "cpu": model,
        "memory_gib": round(memory_gib, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "format": RESULT_FORMAT,
    }
