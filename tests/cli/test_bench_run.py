"""`replog bench` for real, briefly: a few seconds of a paced workload against a local replog
cluster through replog's own client, with its partition 0's leader SIGKILLed midway; every
record sent is acknowledged and received, the JSON result (with the failover) and the report
are written, and the cluster is stopped after. Servers and driver processes are pinned to
the CPUs this test may use (all of them: pinning is recorded, not a speed-up here). An idle
run's second phase starts once the nodes' metrics show every replica of its idle topic. The
transactional smoke workload commits every record it sends, and its read_committed consumer
receives them all."""

from __future__ import annotations

import json
import os
from pathlib import Path

from cli_runner import Outcome, replog

from replog.cli.local_cluster import accepts_connections
from tests.local_ports import free_base_port

WORKLOADS = Path(__file__).resolve().parents[2] / "bench" / "workloads"

WORKLOAD = """\
name: tiny
topics: 1
partitionsPerTopic: 2
messageSize: 100
keyDistributor: KEY_ROUND_ROBIN
producersPerTopic: 1
subscriptionsPerTopic: 1
consumerPerSubscription: 2
producerRate: 200
warmupDurationSeconds: 1
testDurationSeconds: 3
killLeaderAtSeconds: 2
"""


IDLE_WORKLOAD = """\
name: tiny idle
topics: 1
partitionsPerTopic: 1
messageSize: 100
producersPerTopic: 1
subscriptionsPerTopic: 1
consumerPerSubscription: 1
producerRate: 100
warmupDurationSeconds: 0
testDurationSeconds: 1
idlePartitions: 40
"""


def bench(tmp_path: Path, workload_text: str) -> tuple[Outcome, int, str]:
    """`replog bench` of `workload_text` once against replog; its outcome, base port, CPUs."""
    workload = tmp_path / "tiny.yaml"
    workload.write_text(workload_text)
    base_port = free_base_port(3)
    cpus = ",".join(map(str, sorted(os.sched_getaffinity(0))))
    outcome = replog(
        "bench",
        str(workload),
        "--systems",
        "replog",
        "--runs",
        "1",
        "--warm-up-runs",
        "0",
        "--output",
        str(tmp_path / "out"),
        "--work-dir",
        str(tmp_path / "work"),
        "--base-port",
        str(base_port),
        "--server-cpus",
        cpus,
        "--driver-cpus",
        cpus,
    )
    return outcome, base_port, cpus


def test_a_short_run_against_replog_measures_every_record(tmp_path: Path) -> None:
    outcome, base_port, cpus = bench(tmp_path, WORKLOAD)
    assert outcome.returncode == 0, outcome.stderr
    assert "replog run 1/1:" in outcome.stdout
    (run_dir,) = (tmp_path / "out").iterdir()
    result = json.loads((run_dir / "replog-run1.json").read_text())
    produce, end_to_end = result["produce"], result["end_to_end"]
    assert produce["errors"] == 0 and end_to_end["errors"] == 0, result
    # 200 records/s for 4 s (800 sent in all; a loaded machine may send a few fewer), every one
    # acknowledged and received, some after the window: the kill holds acknowledgements back.
    assert sum(result["timeline"]["produced_per_s"]) >= 720
    assert produce["records"] > 0 and end_to_end["records"] > 0
    failover = result["failover"]
    assert failover["killed_node"] in (1, 2, 3) and failover["error"] == ""
    assert 1.9 <= failover["at_s"] < 3 and failover["unavailable_s"] > 0
    assert sum(result["timeline"]["consumed_per_s"]) == sum(result["timeline"]["produced_per_s"])
    assert 0 < produce["latency_ms"]["p50"] <= produce["latency_ms"]["max"]
    assert result["system_info"]["client"] == "replog"
    assert result["system_info"]["server_cpus"] == result["driver_cpus"] == cpus
    # Each producer and consumer ran in a process of its own, and the producer's requests count.
    names = [p["name"] for p in result["driver_processes"]]
    assert names == ["producer-0", "consumer-0", "consumer-1"]
    assert result["requests"]["produce"] > 0
    assert (run_dir / "report.html").exists() and (run_dir / "cdf.png").exists()
    assert not accepts_connections(f"127.0.0.1:{base_port}")


def test_an_idle_runs_second_phase_waits_for_every_replica_of_the_idle_topic(
    tmp_path: Path,
) -> None:
    outcome, base_port, _ = bench(tmp_path, IDLE_WORKLOAD)
    assert outcome.returncode == 0, outcome.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    idle = json.loads((run_dir / "replog-run1.json").read_text())["idle"]
    # Answered by the controller, then led on every node: the wait is recorded and printed.
    assert idle["partitions"] == 40 and idle["idle_answered_s"] > 0
    assert idle["idle_led_wait_s"] >= 0
    assert f"(all led {idle['idle_led_wait_s']:.1f} s after their CreateTopics answer)" in (
        outcome.stdout
    )
    assert (
        "idle topic created, then until every replica was led"
        in (run_dir / "report.html").read_text()
    )
    assert not accepts_connections(f"127.0.0.1:{base_port}")


def test_a_transactional_smoke_run_commits_and_reads_every_record(tmp_path: Path) -> None:
    outcome, base_port, _ = bench(tmp_path, (WORKLOADS / "txn-produce-smoke.yaml").read_text())
    assert outcome.returncode == 0, outcome.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    result = json.loads((run_dir / "replog-run1.json").read_text())
    produce, end_to_end, txn = result["produce"], result["end_to_end"], result["transactions"]
    assert produce["errors"] == end_to_end["errors"] == 0, result
    # Every record of the transactional phase was committed: read_committed receives them all.
    assert txn["records_received"] == txn["records_acknowledged"] > 0
    assert txn["records_per_transaction"] == 100 and txn["commits"] > 0
    assert 0 < txn["commit_latency_ms"]["p50"] <= txn["commit_latency_ms"]["p99"]
    assert txn["committed_mb_per_s"] > 0 and txn["plain_mb_per_s"] > 0
    assert txn["mb_per_s_ratio"] > 0
    assert f"{txn['commits']:,} commits of 100 records" in outcome.stdout
    assert "transaction commit latency p99" in (run_dir / "report.html").read_text()
    assert not accepts_connections(f"127.0.0.1:{base_port}")
