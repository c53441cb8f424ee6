"""`replog bench`'s transactional runs (`recordsPerTransaction`), from stand-ins: the field and
its refusals, a producer process committing every N records with each commit timed, the
commit figures and the overhead against the plain phase from recorded samples, and the goal
rows and report rows they make against Kafka's."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from replog.cli.bench import check_systems, worker
from replog.cli.bench.goals import check_goals
from replog.cli.bench.report import by_system, summary_rows
from replog.cli.bench.runner import commit_figures, transaction_figures
from replog.cli.bench.stats import COMMITS_SUFFIX, MB, Samples, read_samples
from replog.cli.bench.workload import load_workload, parse_workload
from replog.errors import BenchSystemError, WorkloadError

WORKLOADS = Path(__file__).resolve().parents[2] / "bench" / "workloads"
TXN: dict[str, Any] = {
    "name": "txn",
    "topics": 1,
    "partitionsPerTopic": 3,
    "messageSize": 1024,
    "producersPerTopic": 1,
    "subscriptionsPerTopic": 1,
    "consumerPerSubscription": 1,
    "producerRate": "max",
    "warmupDurationSeconds": 1,
    "testDurationSeconds": 2,
    "recordsPerTransaction": 100,
}


def test_records_per_transaction_makes_a_transactional_run() -> None:
    workload = parse_workload(TXN)
    assert workload.records_per_transaction == 100
    assert parse_workload(workload.to_json()) == workload
    plain = parse_workload({k: v for k, v in TXN.items() if k != "recordsPerTransaction"})
    assert plain.records_per_transaction == 0
    assert parse_workload({**TXN, "recordsPerTransaction": 0}) == plain
    shipped = load_workload(str(WORKLOADS / "txn-produce-1kb.yaml"))
    assert (shipped.records_per_transaction, shipped.message_size) == (100, 1024)
    assert shipped.unthrottled


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"recordsPerTransaction": -1}, "recordsPerTransaction", "whole number >= 0"),
        ({"recordsPerTransaction": 2.5}, "recordsPerTransaction", "got 2.5"),
        ({"recordsPerTransaction": True}, "recordsPerTransaction", "got True"),
        ({"killLeaderAtSeconds": 2}, "killLeaderAtSeconds", "not in a transactional run"),
        ({"idlePartitions": 10}, "idlePartitions", "not in a transactional run"),
        ({"clients": ["replog"]}, "clients", "not in a transactional run"),
        (
            {"consumerBacklogSizeGB": 1, "warmupDurationSeconds": 0},
            "consumerBacklogSizeGB",
            "not in a transactional run",
        ),
        (
            {"producerConfig": {"transactional.id": "mine"}},
            "producerConfig.transactional.id",
            "gives each producer its own",
        ),
    ],
)
def test_a_transactional_run_refuses_what_it_cannot_be(
    change: dict[str, Any], field: str, says: str
) -> None:
    with pytest.raises(WorkloadError) as caught:
        parse_workload({**TXN, **change}, source="t.yaml")
    assert caught.value.field == field and says in str(caught.value)
    assert str(caught.value).startswith("t.yaml: ")


def test_jetstream_cannot_run_a_transactional_workload() -> None:
    workload = parse_workload(TXN)
    check_systems(workload, ["replog", "replog-kafka"], "t.yaml")
    with pytest.raises(BenchSystemError, match=r"a transactional run.*jetstream cannot run it"):
        check_systems(workload, ["replog", "jetstream"], "t.yaml")


class _TxnProducer:
    """Records what the worker calls, in order; every record delivered at once."""

    def __init__(self, commit_ms: float = 0.0) -> None:
        self.calls: list[str] = []
        self.commit_ms = commit_ms

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def commit_transaction(self, timeout_s: float) -> None:
        time.sleep(self.commit_ms / 1000)
        self.calls.append("commit")

    def send(self, topic: str, key: bytes | None, value: bytes, done: Any) -> None:
        self.calls.append("send")
        done(None)

    def service(self) -> None:
        pass

    def flush(self, timeout_s: float) -> None:
        pass

    def requests(self) -> int:
        return 3

    def close(self) -> None:
        pass


def test_the_worker_commits_every_n_records_and_times_each_commit(tmp_path: Path) -> None:
    producer = _TxnProducer(commit_ms=5)
    task = {
        "message_size": 64,
        "index": 0,
        "key_distributor": "NO_KEY",
        "rate": 0,
        "records": 25,
        "run_s": 60,
        "topic": "t",
        "records_per_transaction": 10,
        "samples_path": str(tmp_path / "p.samples"),
    }
    samples, fields = worker.produce(task, producer, start_ns=time.time_ns())
    # Two whole transactions, then the last one with the 5 records left.
    expected = (["begin", *["send"] * 10, "commit"] * 2) + ["begin", *["send"] * 5, "commit"]
    assert producer.calls == expected
    assert len(samples.sent_s) == 25 and fields["commits"] == 3
    commits = read_samples(task["samples_path"] + COMMITS_SUFFIX)
    assert len(commits.latency_ms) == 3 and all(ms >= 5 for ms in commits.latency_ms)
    assert list(commits.sent_s) == sorted(commits.sent_s)


def test_a_plain_task_neither_begins_nor_commits(tmp_path: Path) -> None:
    producer = _TxnProducer()
    task = {
        "message_size": 64,
        "index": 0,
        "key_distributor": "NO_KEY",
        "rate": 0,
        "records": 5,
        "run_s": 60,
        "topic": "t",
        "samples_path": str(tmp_path / "p.samples"),
    }
    _, fields = worker.produce(task, producer, start_ns=time.time_ns())
    assert producer.calls == ["send"] * 5 and "commits" not in fields
    assert not (tmp_path / ("p.samples" + COMMITS_SUFFIX)).exists()


def recorded_commits(per_s: int, latency_ms: float, seconds: int = 4) -> Samples:
    """`per_s` commits a second for `seconds` (warm-up 1 s, window 2 s, then one more), each
    taking `latency_ms`, every tenth 10 ms more."""
    commits = Samples()
    for i in range(per_s * seconds):
        commits.add(i / per_s, latency_ms + (10 if i % 10 == 9 else 0))
    return commits


def test_commit_figures_count_the_measured_window() -> None:
    workload = parse_workload(TXN)
    figures = commit_figures(recorded_commits(50, 4.0), workload)
    # Begun in [1, 3) s: 100 commits (latencies); ended in [1, 3) s: 100 commits of 100 records.
    assert figures["commits"] == 100 and figures["commits_per_s"] == 50
    assert figures["committed_mb_per_s"] == pytest.approx(50 * 100 * 1024 / MB)
    assert figures["commit_latency_ms"]["p50"] == 4.0
    assert figures["commit_latency_ms"]["p99"] == 14.0
    assert figures["records_per_transaction"] == 100


def result(system: str, per_s: int, commit_ms: float, plain_mb: float) -> dict[str, Any]:
    """A recorded transactional run's result: its transactional phase's commits and the plain
    phase's figures."""
    workload = parse_workload(TXN)
    transactional = {"transactions": commit_figures(recorded_commits(per_s, commit_ms), workload)}
    plain = {
        "produce": {"mb_per_s": plain_mb, "latency_ms": {"p99": 7.0}},
        "end_to_end": {"latency_ms": {"p99": 9.0}},
        "load_average": {"before": [0.5, 0.5, 0.5], "after": [0.5, 0.5, 0.5]},
    }
    transactional["transactions"].update(transaction_figures(plain, transactional))
    return {"system": system, "workload": workload.to_json(), **transactional}


def test_the_overhead_is_the_committed_mb_per_s_over_the_plain_phases() -> None:
    figures = result("replog", 40, 5.0, plain_mb=8.0)["transactions"]
    assert figures["plain_mb_per_s"] == 8.0 and figures["plain_produce_p99_ms"] == 7.0
    assert figures["mb_per_s_ratio"] == pytest.approx(40 * 100 * 1024 / MB / 8.0, abs=1e-4)
    nothing = {
        "produce": {"mb_per_s": 0.0, "latency_ms": {"p99": 0.0}},
        "end_to_end": {"latency_ms": {"p99": 0.0}},
        "load_average": {},
    }
    assert transaction_figures(nothing, {"transactions": figures})["mb_per_s_ratio"] == 0.0


def test_the_goals_compare_committed_mb_per_s_and_commit_p99_with_kafkas() -> None:
    runs = [
        result("replog-kafka", 60, 3.0, plain_mb=10.0),
        result("replog-kafka", 50, 4.0, plain_mb=10.0),
        result("replog-kafka", 70, 5.0, plain_mb=10.0),
        result("kafka", 50, 6.0, plain_mb=9.0),
    ]
    checks = {c.goal.text: c for c in check_goals(by_system(runs))}
    mb = checks["transactional produce MB/s (committed) >= 1.0x Kafka's"]
    p99 = checks["transaction commit p99 <= Kafka's"]
    assert mb.verdict == "met" and mb.ratio == pytest.approx(60 / 50)
    # Each side's min, median and max of its runs, and the medians' ratio.
    assert mb.row()[2] == "(4.88, 5.86, 6.84) / 4.88" and mb.row()[3] == "1.20x"
    assert p99.subject_median == 14.0 and p99.against_median == 16.0
    assert p99.verdict == "met" and p99.row()[2] == "(13, 14, 15) / 16"
    # The peak-produce goal is a plain run's: a transactional run has no row for it.
    assert "produce MB/s >= 1.0x Kafka's peak" not in checks
    slower = [result("replog-kafka", 40, 9.0, plain_mb=10.0), result("kafka", 50, 6.0, 9.0)]
    verdicts = {c.goal.text: c.verdict for c in check_goals(by_system(slower))}
    assert verdicts["transactional produce MB/s (committed) >= 1.0x Kafka's"] == "missed"
    assert verdicts["transaction commit p99 <= Kafka's"] == "missed"


def test_the_report_has_the_transactional_rows() -> None:
    runs = [result("replog-kafka", 60, 3.0, 10.0), result("kafka", 50, 6.0, 9.0)]
    rows = {row[0]: row[1:] for row in summary_rows(by_system(runs)) if "transact" in row[0]}
    assert set(rows) == {
        "transactional produce, committed (MB/s)",
        "transactional / plain produce (MB/s ratio)",
        "transaction commit latency p50 (ms)",
        "transaction commit latency p99 (ms)",
        "transactions committed (per s)",
    }
    assert rows["transaction commit latency p99 (ms)"] == [
        "13.0 / 13.0 / 13.0 (0.81x)",
        "16.0 / 16.0 / 16.0",
    ]
