"""How fast a reassignment moves a partition with `kafka-reassign-partitions --throttle`,
against the same move unthrottled: does a throttled move go at the rate set?

A local 3-node cluster (`replog cluster start`, this tree's code) gets a topic of one
partition, replication factor 1, on broker 1, and `--mb` MB written to it (Kafka's
`ProducerPerformance`, 1,000-byte records, acks=1). Then `--runs` rounds of two moves each,
the unthrottled move first: each moves the partition's one replica to the next broker
(1 -> 2 -> 3 -> 1 ...) with Kafka 4.4's `ReassignPartitionsCommand --execute`, with
`--throttle --rate` or without. While it runs, the target's log (its `.log` files) is sized
every `--poll-s` seconds; a move is done when the target holds as many bytes as the source
and the source's replica is gone. The throttles the tool set are then removed with
`ConfigCommand --delete-config` (Kafka's `--verify` also deletes a log-dirs key replog does
not know).

Per move it prints the bytes moved, the time from the target's first byte to its last, the
rate (bytes / that time) and its ratio to the rate set, and the rate over time: min / median /
max of the rates of each whole second of the move. Then per kind, min / median / max of the
moves' rates.

Command: `python bench/replication_throttle.py --mb 60 --rate 5000000 --runs 3 --base-port
27500` (ports P..P+2 and their metrics (+100) and Kafka (+200) ports; data under $TMPDIR).
Needs Java; Kafka 4.4.0's jars are fetched once as bench/kafka_tools_check.py fetches them.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

_BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _BENCH_DIR]
sys.path.insert(0, os.path.dirname(_BENCH_DIR))
sys.path.insert(0, _BENCH_DIR)

from kafka_tools_check import kafka_libs, tool  # noqa: E402
from replog_cli import KAFKA_PORT_OFFSET, running_cluster  # noqa: E402

LIBS = functools.cache(kafka_libs)  # Kafka's jars, fetched at the first use
TOPIC = "throttle-bench"
BROKERS = (1, 2, 3)
RATE_KEYS = "leader.replication.throttled.rate,follower.replication.throttled.rate"
REPLICA_KEYS = "leader.replication.throttled.replicas,follower.replication.throttled.replicas"


def kafka_tool(main_class: str, *args: str) -> str:
    """Run Kafka's `org.apache.kafka.tools.<main_class>`; its output, RuntimeError if it
    failed."""
    status, stdout, stderr = tool(LIBS(), main_class, *args)
    if status != 0:
        raise RuntimeError(f"{main_class} {' '.join(args)} failed: {stderr.strip()[-2000:]}")
    return stdout + stderr


def log_bytes(data_dir: str, broker: int) -> int | None:
    """The bytes of the `.log` files of broker `broker`'s replica; None if it has none."""
    where = os.path.join(data_dir, f"node-{broker}", "data", f"{TOPIC}-0")
    if not os.path.isdir(where):
        return None
    total = 0
    for path in glob.glob(os.path.join(where, "*.log")):
        with contextlib.suppress(FileNotFoundError):  # a segment deleted while listed
            total += os.path.getsize(path)
    return total


def move(
    data_dir: str, kafka: str, source: int, target: int, rate: int | None, poll_s: float
) -> dict[str, Any]:
    """Reassign the partition from `source` to `target` (throttled at `rate` if given) and
    time it from the target's log sizes."""
    size = log_bytes(data_dir, source)
    assert size, f"broker {source} holds no data"
    plan = {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [target]}]}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(plan, f)
    throttle = [] if rate is None else ["--throttle", str(rate)]
    args = ["--bootstrap-server", kafka, "--reassignment-json-file", f.name, "--execute"]
    tool = subprocess.Popen(
        [
            "java",
            "-cp",
            os.path.join(LIBS(), "*"),
            "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
            *args,
            *throttle,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    samples: list[tuple[float, int]] = []
    deadline = time.monotonic() + 120 + 5 * size / (rate or 10**7)
    while True:
        now = time.monotonic()
        if now > deadline:
            raise RuntimeError(
                f"the move to broker {target} did not finish in time: {samples[-3:]}"
            )
        moved = log_bytes(data_dir, target) or 0
        if moved:
            samples.append((now, moved))
        if moved >= size and log_bytes(data_dir, source) is None:
            break
        time.sleep(poll_s)
    _, stderr = tool.communicate(timeout=120)
    os.unlink(f.name)
    if tool.returncode != 0:
        raise RuntimeError(f"ReassignPartitionsCommand failed: {stderr.strip()[-2000:]}")
    if rate is not None:
        for broker in BROKERS:
            kafka_tool(
                "ConfigCommand", "--bootstrap-server", kafka, "--entity-type", "brokers",
                "--entity-name", str(broker), "--alter", "--delete-config", RATE_KEYS,
            )  # fmt: skip
        kafka_tool(
            "ConfigCommand", "--bootstrap-server", kafka, "--entity-type", "topics",
            "--entity-name", TOPIC, "--alter", "--delete-config", REPLICA_KEYS,
        )  # fmt: skip
    # When the target had all of it: the first poll that saw the whole size.
    end = next(t for t, b in samples if b >= size)
    start = samples[0][0]
    seconds = max(end - start, poll_s)

    def bytes_at(t: float) -> int:
        return max((b for t0, b in samples if t0 <= t), default=0)

    # The rate over time: the bytes each whole second of the move brought.
    per_second = [bytes_at(start + k + 1) - bytes_at(start + k) for k in range(int(end - start))]
    return {
        "bytes": size,
        "seconds": seconds,
        "rate": size / seconds,
        # min / median / max of the whole seconds' rates (none for a move under a second)
        "per_second": (
            (min(per_second), statistics.median(per_second), max(per_second)) if per_second else ()
        ),
    }


def spread(values: list[float]) -> str:
    return "/".join(f"{v / 1e6:.2f}" for v in (min(values), statistics.median(values), max(values)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=60, help="MB written to the topic")
    parser.add_argument("--rate", type=int, default=5_000_000, help="--throttle, bytes/s")
    parser.add_argument("--runs", type=int, default=3, help="rounds of (unthrottled, throttled)")
    parser.add_argument("--poll-s", type=float, default=0.1)
    parser.add_argument("--base-port", type=int, default=27500)
    args = parser.parse_args()
    kafka = f"127.0.0.1:{args.base_port + KAFKA_PORT_OFFSET}"
    with tempfile.TemporaryDirectory(prefix="replication-throttle-") as root:
        data_dir = os.path.join(root, "cluster")
        with running_cluster(data_dir, args.base_port):
            kafka_tool(
                "TopicCommand", "--bootstrap-server", kafka, "--create", "--topic", TOPIC,
                "--replica-assignment", "1",
            )  # fmt: skip
            kafka_tool(
                "ProducerPerformance", "--topic", TOPIC, "--num-records", str(args.mb * 1000),
                "--record-size", "1000", "--throughput", "-1", "--producer-props",
                f"bootstrap.servers={kafka}", "acks=1", "batch.size=262144", "linger.ms=20",
            )  # fmt: skip
            time.sleep(2)  # the last appends reach the file
            print(f"written: {log_bytes(data_dir, 1):,} bytes of log on broker 1")
            results: dict[str, list[dict[str, Any]]] = {"unthrottled": [], "throttled": []}
            source = 1
            for run in range(args.runs):
                for kind, rate in (("unthrottled", None), ("throttled", args.rate)):
                    target = source % len(BROKERS) + 1
                    r = move(data_dir, kafka, source, target, rate, args.poll_s)
                    results[kind].append(r)
                    ratio = "" if rate is None else f", {r['rate'] / rate:.3f} x the rate set"
                    seconds = r["per_second"]
                    over_time = (
                        "/".join(f"{x / 1e6:.2f}" for x in seconds) + " MB"
                        if seconds
                        else "- (under a second)"
                    )
                    print(
                        f"run {run + 1} {kind:>11} {source}->{target}: {r['bytes']:,} B in "
                        f"{r['seconds']:.2f} s = {r['rate'] / 1e6:.2f} MB/s{ratio}; per second "
                        f"min/median/max {over_time}",
                        flush=True,
                    )
                    source = target
    print(f"rate set: {args.rate / 1e6:.2f} MB/s (--throttle {args.rate})")
    for kind, runs in results.items():
        rates = [r["rate"] for r in runs]
        medians = [r["per_second"][1] for r in runs if r["per_second"]]
        line = f"{kind:>11}: move rate min/median/max {spread(rates)} MB/s"
        if kind == "throttled":
            ratios = [x / args.rate for x in rates]
            line += f" ({min(ratios):.3f}/{statistics.median(ratios):.3f}/{max(ratios):.3f} x set)"
        if medians:
            line += f"; its moves' per-second medians {spread(medians)} MB"
        print(line)


if __name__ == "__main__":
    main()
