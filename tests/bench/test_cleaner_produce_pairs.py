"""bench/cleaner_produce.py's parts that need no cluster: which configurations a run takes,
Kafka's topics beside replog's, the passes counted from either system's node log, and each
system's cleaner on / off ratios per run."""

from __future__ import annotations

import pytest
from bench_script import load_bench_script

bench = load_bench_script("cleaner_produce.py", "bench_cleaner_produce")


def arguments(*argv: str) -> object:
    return bench.parser().parse_args(list(argv))


def test_kafka_adds_its_pair_and_only_keeps_the_named() -> None:
    every = bench.chosen_configurations(arguments("--kafka"))
    assert list(every)[-2:] == ["kafka, cleaner on", "kafka, cleaner off"]
    assert every["kafka, cleaner on"].system == "kafka"
    assert every["kafka, cleaner off"].settings == ("log.cleaner.enable=false",)
    assert "kafka, cleaner on" not in bench.chosen_configurations(arguments())

    chosen = bench.chosen_configurations(
        arguments("--kafka", "--only", "cleaner off", "--only", "kafka, cleaner on")
    )
    assert list(chosen) == ["cleaner off", "kafka, cleaner on"]

    with pytest.raises(SystemExit, match="no configuration 'kafka, cleaner on'"):
        bench.chosen_configurations(arguments("--only", "kafka, cleaner on"))


def test_kafka_topics_match_replogs_but_for_the_segment_key() -> None:
    def settings(configs: tuple[str, ...]) -> dict[str, str]:
        return dict(config.split("=", 1) for config in configs)

    replog, kafka = settings(bench.COMPACTED), settings(bench.KAFKA_COMPACTED)
    assert kafka.pop("internal.segment.bytes") == replog.pop("segment.bytes") == "262144"
    assert kafka == replog


def test_passes_are_counted_from_either_systems_log() -> None:
    replog_log = [
        "INFO replog.storage.cleaner: load-0: cleaned offsets 0 to 900 in 12 ms: ..., idle",
        "INFO replog.storage.cleaner: load-0: cleaned offsets 900 to 1800 in 9 ms: "
        "1 of 2 bytes kept (50.0%), urgent, promoted; 3 segment groups swapped, 4 unchanged",
        "INFO replog.server: node 1: started",
    ]
    kafka_log = [
        "[2026-11-29 18:00:00,000] INFO [kafka-log-cleaner-thread-0]: ",
        "\tLog cleaner thread 0 cleaned log load-0 (dirty section = [0, 900])",
        "\t0.2 MB of log processed in 0.0 seconds (11.3 MB/sec).",
        "\tLog cleaner thread 0 cleaned log load-0 (dirty section = [900, 1800])",
    ]
    assert bench.count_passes(iter(replog_log), "replog") == {
        "passes": 2,
        "urgent_passes": 1,
        "promoted_passes": 1,
        "groups_swapped": 3,
        "groups_kept": 4,
    }
    assert bench.count_passes(iter(kafka_log), "kafka")["passes"] == 2
    assert bench.count_passes(iter(kafka_log), "replog")["passes"] == 0


def run(p50: float, fetch_p50: float) -> dict[str, float]:
    figures = dict.fromkeys(bench.RATIO_FIGURES, 1.0)
    figures.update(p50_ms=p50, fetch_p50_ms=fetch_p50)
    return figures


def test_ratios_pair_each_run_with_the_same_runs_cleaner_off() -> None:
    results = {
        "cleaner on": [run(3.0, 2.0), run(2.0, 3.0)],
        "cleaner off": [run(2.0, 2.0), run(1.0, 2.0)],
        "kafka, cleaner on": [run(1.5, 1.0), run(1.0, 1.0)],
        "kafka, cleaner off": [run(1.0, 2.0), run(1.0, 1.0)],
    }
    ratios = bench.on_off_ratios(results)
    assert ratios["replog"]["p50_ms"] == [1.5, 2.0]
    assert ratios["replog"]["fetch_p50_ms"] == [1.0, 1.5]
    assert ratios["kafka"]["p50_ms"] == [1.5, 1.0]
    assert ratios["kafka"]["fetch_p50_ms"] == [0.5, 1.0]
    assert ratios["kafka"]["max_ms"] == [1.0, 1.0]

    del results["kafka, cleaner off"]
    assert list(bench.on_off_ratios(results)) == ["replog"]


def test_summary_shows_only_what_every_run_has() -> None:
    kafka_runs = [
        {**run(1.0, 1.0), "cleaning_cores": 0.25, "passes": 40},
        {**run(3.0, 1.0), "cleaning_cores": 0.35, "passes": 60},
    ]
    line = bench.summary_line("kafka, cleaner on", kafka_runs)
    assert line.startswith("kafka, cleaner on: p50 1.00 / 2.00 / 3.00")
    assert "cleaning 0.25 / 0.30 / 0.35 cores" in line
    assert "passes 40.00 / 50.00 / 60.00" in line
    assert "loop wait" not in line
