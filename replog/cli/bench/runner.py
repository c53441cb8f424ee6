"""One benchmark run of a workload against a running system, and its JSON result.

A run creates the workload's topics afresh (`bench-<run id>-<i>`), starts its consumers (each
assigned its share of a subscription's partitions, from the earliest offset), then its
producers, which send for warm-up + duration at the workload's rate (or unthrottled) and then
flush; consumers go on until they have received every acknowledged record (or `DRAIN_S` passed
without a new one). Every record's value starts with its send time (ns since the epoch, 8
bytes, big-endian), from which consumers measure end-to-end latency; producers measure from
just before `send` to the delivery callback.

Rules: producers and consumers run on threads of this process, so the client library's cost
is part of what is measured: the result records this process's CPU use (`driver_cpu_cores`)
and calls a run `client_bound` when it kept a whole core busy (Python's GIL makes one core this
process's ceiling for Python work). The machine's load average before and after is recorded
too: on a shared machine the figures are noisy, and the report says so.
"""

from __future__ import annotations

import os
import platform
import random
import resource
import struct
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from replog.cli.bench.drivers import BenchConsumer, BenchProducer, Driver
from replog.cli.bench.stats import Samples, run_result, unavailability
from replog.cli.bench.workload import Workload

DRAIN_S = 10.0  # consumers stop after this long without a record once producers are done
FLUSH_S = 60.0
POLL_S = 0.1
CLIENT_BOUND_CORES = 0.9
KEY_SET = 10_000  # KEY_ROUND_ROBIN cycles through this many keys (as the OMB does)
SEND_TIME = struct.Struct(">q")
RESULT_FORMAT = 1


def payload(size: int, seed: int = 0) -> bytes:
    """`size` random bytes (the first 8 are overwritten by each send's time)."""
    return random.Random(seed).randbytes(size)


def key_source(distributor: str, producer_index: int) -> Callable[[int], bytes | None]:
    """The key of the n-th record a producer sends."""
    if distributor == "KEY_ROUND_ROBIN":
        keys = [f"key-{producer_index}-{i}".encode() for i in range(KEY_SET)]
        return lambda n: keys[n % KEY_SET]
    if distributor == "RANDOM_NANO":
        return lambda n: str(time.perf_counter_ns()).encode()
    return lambda n: None


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


class _Run:
    def __init__(self, driver: Driver, workload: Workload, topics: list[str]) -> None:
        self.driver = driver
        self.workload = workload
        self.topics = topics
        self.produced = Samples()
        self.consumed = Samples()
        self.acked = 0
        self.producers_done = threading.Event()
        self.stop_consumers = threading.Event()
        self.start_mono = 0.0
        self.start_wall_ns = 0

    def produce(self, topic: str, index: int, producer: BenchProducer) -> None:
        workload = self.workload
        body = bytearray(payload(workload.message_size, seed=index))
        keys = key_source(workload.key_distributor, index)
        rate = workload.rate_per_producer()
        produced = self.produced
        start = self.start_mono
        end = start + workload.warmup_s + workload.duration_s
        perf = time.perf_counter
        sent = 0
        try:
            while True:
                now = time.monotonic()
                if now >= end:
                    break
                if rate:
                    due = start + sent / rate
                    if due > now + 0.001:
                        time.sleep(due - now)
                SEND_TIME.pack_into(body, 0, time.time_ns())
                sent_at = perf()
                sent_s = time.monotonic() - start

                def done(
                    error: str | None, sent_at: float = sent_at, sent_s: float = sent_s
                ) -> None:
                    if error is None:
                        produced.add(sent_s, (perf() - sent_at) * 1000)
                    else:
                        produced.error(error)

                producer.send(topic, keys(sent), bytes(body), done)
                producer.service()
                sent += 1
            producer.flush(FLUSH_S)
        except Exception as exc:
            produced.error(f"{type(exc).__name__}: {exc}")
        finally:
            producer.close()

    def consume(self, consumer: BenchConsumer) -> None:
        consumed = self.consumed
        start_wall_ns = self.start_wall_ns
        unpack = SEND_TIME.unpack_from
        last_record = time.monotonic()
        try:
            while not self.stop_consumers.is_set():
                values = consumer.poll(POLL_S)
                now_ns = time.time_ns()
                for value in values:
                    (sent_ns,) = unpack(value)
                    consumed.add((sent_ns - start_wall_ns) / 1e9, (now_ns - sent_ns) / 1e6)
                if values:
                    last_record = time.monotonic()
                elif self.producers_done.is_set() and time.monotonic() - last_record > DRAIN_S:
                    break
        except Exception as exc:
            consumed.error(f"{type(exc).__name__}: {exc}")
        finally:
            consumer.close()

    def drained(self) -> bool:
        expected = len(self.produced.sent_s) * self.workload.subscriptions_per_topic
        return len(self.consumed.sent_s) >= expected


def run_once(
    driver: Driver,
    workload: Workload,
    create_topics: Callable[[list[str], int], None],
    kill_leader: Callable[[str], int] | None = None,
) -> dict[str, Any]:
    """Run `workload` once through `driver`; the run's JSON result (without system fields).
    With the workload's `killLeaderAtSeconds`, `kill_leader(topic)` SIGKILLs the leader of the
    first topic's partition 0 then (returning its node id), and the result has "failover"."""
    run_id = uuid.uuid4().hex[:8]
    topics = [f"bench-{run_id}-{i}" for i in range(workload.topics)]
    create_topics(topics, workload.partitions_per_topic)
    run = _Run(driver, workload, topics)
    consumers = [driver.consumer(share) for share in assignments(topics, workload)]
    producers = [
        (topic, index, driver.producer(workload.producer_config))
        for index, topic in enumerate(
            t for t in topics for _ in range(workload.producers_per_topic)
        )
    ]
    load_before = os.getloadavg()
    cpu_before = _cpu_s()
    run.start_mono = time.monotonic()
    run.start_wall_ns = time.time_ns()
    consumer_threads = [
        threading.Thread(target=run.consume, args=(c,), name=f"bench-consumer-{i}", daemon=True)
        for i, c in enumerate(consumers)
    ]
    producer_threads = [
        threading.Thread(target=run.produce, args=p, name=f"bench-producer-{p[1]}", daemon=True)
        for p in producers
    ]
    killed: dict[str, Any] = {}
    killer = None
    if workload.kill_leader_at_s is not None and kill_leader is not None:

        def kill() -> None:
            killed["at_s"] = time.monotonic() - run.start_mono
            try:
                killed["node"] = kill_leader(topics[0])
            except Exception as exc:
                killed["error"] = f"{type(exc).__name__}: {exc}"

        killer = threading.Timer(workload.kill_leader_at_s, kill)
        killer.daemon = True
    for thread in (*consumer_threads, *producer_threads):
        thread.start()
    if killer is not None:
        killer.start()
    for thread in producer_threads:
        thread.join()
    if killer is not None:
        killer.join()
    produced_s = time.monotonic() - run.start_mono
    cpu_produced = _cpu_s() - cpu_before
    run.producers_done.set()
    deadline = time.monotonic() + FLUSH_S
    while (
        not run.drained()
        and time.monotonic() < deadline
        and any(t.is_alive() for t in consumer_threads)
    ):
        time.sleep(POLL_S)
    run.stop_consumers.set()
    for thread in consumer_threads:
        thread.join(DRAIN_S + 5)
    cpu_cores = cpu_produced / produced_s if produced_s > 0 else 0.0
    result = run_result(
        run.produced,
        run.consumed,
        warmup_s=workload.warmup_s,
        duration_s=workload.duration_s,
        message_size=workload.message_size,
        run_seconds=int(produced_s) + 1,
    )
    if killed:
        sends_end = workload.warmup_s + workload.duration_s
        result["failover"] = {
            "killed_node": killed.get("node"),
            "at_s": round(killed["at_s"], 3),
            "error": killed.get("error", ""),
            "unavailable_s": round(
                unavailability(run.produced, from_s=killed["at_s"], to_s=sends_end), 3
            ),
            "end_to_end_unavailable_s": round(
                unavailability(run.consumed, from_s=killed["at_s"], to_s=sends_end), 3
            ),
        }
    result.update(
        {
            "topics": topics,
            "driver": driver.name,
            "driver_cpu_cores": round(cpu_cores, 3),
            "client_bound": cpu_cores >= CLIENT_BOUND_CORES,
            "load_average": {
                "before": [round(x, 2) for x in load_before],
                "after": [round(x, 2) for x in os.getloadavg()],
            },
        }
    )
    return result


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


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
