"""`replog bench`'s summaries and report, from canned samples: percentiles and rates count
only the measured window, the table gives min / median / max and the ratio to Kafka, and the
page, its three small PNGs and `replog bench --report DIR` are made from the JSON alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_runner import replog

from replog.cli.bench.report import load_results, summary_rows, write_report
from replog.cli.bench.stats import Samples, percentile, run_result, timeline, unavailability
from replog.cli.bench.workload import parse_workload
from replog.errors import ReplogError

WORKLOAD = parse_workload(
    {
        "name": "canned",
        "topics": 1,
        "partitionsPerTopic": 1,
        "messageSize": 1000,
        "producersPerTopic": 1,
        "subscriptionsPerTopic": 1,
        "consumerPerSubscription": 1,
        "producerRate": 100,
        "warmupDurationSeconds": 1,
        "testDurationSeconds": 2,
    }
)


def samples(latency_ms: float, per_s: int = 100, seconds: int = 3) -> Samples:
    """`per_s` records a second for `seconds`, each with `latency_ms` (+1 ms for every tenth)."""
    out = Samples()
    for i in range(per_s * seconds):
        out.add(i / per_s, latency_ms + (1 if i % 10 == 9 else 0))
    return out


def canned(system: str, run: int, latency_ms: float, cpu: float = 0.2) -> dict[str, Any]:
    result = run_result(
        samples(latency_ms),
        samples(latency_ms * 2),
        warmup_s=WORKLOAD.warmup_s,
        duration_s=WORKLOAD.duration_s,
        message_size=WORKLOAD.message_size,
        run_seconds=4,
    )
    result.update(
        system=system,
        run=run,
        driver="confluent-kafka",
        driver_cpu_cores=cpu,
        client_bound=cpu >= 0.9,
        load_average={"before": [1.5, 1.0, 1.0], "after": [1.0, 1.0, 1.0]},
        workload=WORKLOAD.to_json(),
        system_info={"system": system, "version": "x"},
        machine={"cores": 2, "cpu": "test"},
        versions={"replog": "0.1.0"},
    )
    return result


def test_the_summary_counts_the_measured_window_only() -> None:
    slow = Samples()
    slow.add(0.5, 600)  # sent in the warm-up, acknowledged in the window: counted in the rate
    slow.add(2.5, 600)  # sent in the window, acknowledged after it: only its latency counts
    summary = run_result(slow, Samples(), warmup_s=1, duration_s=2, message_size=10, run_seconds=4)[
        "produce"
    ]
    assert summary["records"] == 1 and summary["latency_ms"]["max"] == 600
    result = canned("kafka", 1, latency_ms=4)
    produce = result["produce"]
    assert produce["records"] == 200  # acknowledged in [1 s, 3 s) at 100/s
    assert produce["records_per_s"] == 100
    assert produce["mb_per_s"] == pytest.approx(100 * 1000 / 2**20)
    assert produce["latency_ms"]["p50"] == 4 and produce["latency_ms"]["p95"] == 5
    assert result["end_to_end"]["latency_ms"]["max"] == 9
    assert result["timeline"]["produced_per_s"] == [100, 100, 100, 0]
    assert result["produce"]["cdf"][-1] == [5, 1.0]


def test_percentiles_are_nearest_rank_and_the_timeline_buckets_by_acknowledgement() -> None:
    assert percentile([1, 2, 3, 4], 0.5) == 2 and percentile([1, 2, 3, 4], 0.99) == 4
    assert percentile([], 0.5) == 0
    late = Samples()
    late.add(0.5, 700)  # sent at 0.5 s, acknowledged at 1.2 s
    assert timeline(late, 2) == [0, 1]


def test_unavailability_is_the_longest_gap_without_an_acknowledgement_after_the_kill() -> None:
    acks = Samples()
    for sent_s in (1.0, 2.0, 2.5, 6.0, 6.5):
        acks.add(sent_s, 100)  # acknowledged 0.1 s after sending
    assert unavailability(acks, from_s=2.2, to_s=7) == pytest.approx(3.5)  # 2.6 -> 6.1
    assert unavailability(acks, from_s=6.7, to_s=7) == pytest.approx(0.3)  # none after it
    assert unavailability(Samples(), from_s=1, to_s=4) == 3


def test_the_table_gives_spread_and_ratio_to_kafka() -> None:
    grouped = {
        "replog": [canned("replog", n, latency_ms) for n, latency_ms in ((1, 2), (2, 3), (3, 8))],
        "kafka": [canned("kafka", n, 4) for n in (1, 2, 3)],
    }
    rows = {row[0]: row[1:] for row in summary_rows(grouped)}
    assert rows["produce latency p50 (ms)"] == ["2.00 / 3.00 / 8.00 (0.75x)", "4.00 / 4.00 / 4.00"]
    assert rows["produce throughput (records/s)"][0].endswith("(1.00x)")


def test_catch_up_and_request_rows_show_when_every_run_has_them() -> None:
    grouped = {"replog": [canned("replog", 1, 2)], "kafka": [canned("kafka", 1, 4)]}
    for system, mb_per_s, per_s in (("replog", 90.0, 300.0), ("kafka", 60.0, 600.0)):
        grouped[system][0]["catch_up"] = {"mb_per_s": mb_per_s, "seconds": 2048 / mb_per_s}
        grouped[system][0]["requests"] = {"produce_per_s": per_s, "per_broker_per_s": per_s / 3}
    rows = {row[0]: row[1:] for row in summary_rows(grouped)}
    assert rows["catch-up read (MB/s)"] == ["90.0 / 90.0 / 90.0 (1.50x)", "60.0 / 60.0 / 60.0"]
    assert rows["produce requests (per s per broker)"][0] == "100 / 100 / 100 (0.50x)"
    del grouped["kafka"][0]["catch_up"]  # a run without the figure: no row
    assert "catch-up read (MB/s)" not in {row[0] for row in summary_rows(grouped)}


def test_the_wait_for_the_idle_topic_is_a_row() -> None:
    grouped = {"replog": [canned("replog", 1, 2)], "kafka": [canned("kafka", 1, 4)]}
    for system, wait_s in (("replog", 1.5), ("kafka", 30.0)):
        grouped[system][0]["idle"] = {"idle_answered_s": 0.2, "idle_led_wait_s": wait_s}
    rows = {row[0]: row[1:] for row in summary_rows(grouped)}
    label = "idle topic created, then until every replica was led (before the phase beside it) (s)"
    assert rows[label] == ["1.50 / 1.50 / 1.50 (0.05x)", "30.0 / 30.0 / 30.0"]


def test_the_report_is_made_from_the_json_files(tmp_path: Path) -> None:
    killed = canned("kafka", 1, 4)
    killed["failover"] = {
        "killed_node": 2,
        "at_s": 1.5,
        "unavailable_s": 0.25,
        "end_to_end_unavailable_s": 0.5,
        "error": "",
    }
    for result in (canned("replog", 1, 2, cpu=0.95), killed):
        path = tmp_path / f"{result['system']}-run1.json"
        path.write_text(json.dumps(result))
    (tmp_path / "notes.json").write_text("{}")  # not a result: left out
    assert [r["system"] for r in load_results(str(tmp_path))] == ["kafka", "replog"]
    outcome = replog("bench", "--report", str(tmp_path))
    assert outcome.returncode == 0, outcome.stderr
    page = (tmp_path / "report.html").read_text()
    assert "Client-bound" in page and "replog" in page and "Noisy" in page
    assert (
        "<td>unavailable after the leader&#x27;s kill, produce (s)</td><td>0.25 / 0.25 / 0.25"
        in page
    )
    for name in ("throughput.png", "latency.png", "cdf.png"):
        png = tmp_path / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert png.stat().st_size < 100_000
        assert f"src='{name}'" in page


def test_a_directory_without_results_says_so(tmp_path: Path) -> None:
    with pytest.raises(ReplogError, match="no benchmark results"):
        load_results(str(tmp_path))
    with pytest.raises(ReplogError, match="no benchmark results"):
        write_report(load_results(str(tmp_path)), str(tmp_path))


def test_bench_help_loads_neither_the_plots_nor_the_clients() -> None:
    probe = (
        "import json, sys\n"
        "from replog.cli.main import main\n"
        "try:\n"
        "    main(['bench', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = json.loads(done.stdout.splitlines()[-1])
    heavy = ("matplotlib", "confluent_kafka", "yaml", "grpc", "replog.server", "replog.client")
    assert [m for m in loaded if m.split(".")[0] in heavy or m.startswith(heavy)] == []


def test_a_figure_no_run_measured_has_no_row() -> None:
    grouped = {"replog": [canned("replog", 1, 2)], "kafka": [canned("kafka", 1, 4)]}
    for runs in grouped.values():
        runs[0]["produce"]["mb_per_s"] = 0.0  # as in a controller run: nothing produced
    labels = {row[0] for row in summary_rows(grouped)}
    assert "produce throughput (MB/s)" not in labels
    assert "produce throughput (records/s)" in labels
