"""bench/spark_read.py's report for every combination of its source options: no empty or
"-" cells, CPU per row and ceiling CPU / replog CPU beside the wall-time figures, the Kafka
columns and table only when the JVM source ran (else one line saying it did not), replog /
Apache Kafka only with `--apache-kafka`, and the options that contradict each other refused."""

from __future__ import annotations

import itertools

import pytest
from bench_script import load_bench_script

spark_read = load_bench_script("spark_read.py", "spark_read_bench")
RECORDS = 1_000_000


def timed_runs(sources: list[str], count: int) -> list:  # type: ignore[type-arg]
    """`count` runs in which each source took its own time per query (run r: r + 1 times as
    long for replog, so replog's figures differ between runs and the others' do not)."""
    runs = []
    for run in range(count):
        result = spark_read.RunResult(run + 1, "1.00 1.00 1.00")
        for q, query in enumerate(spark_read.QUERIES):
            result.seconds[query] = {
                source: (1 + q) * (1 + i) * (run + 1 if source == "replog" else 1)
                for i, source in enumerate(sources)
            }
            result.cpu[query] = {source: t / 2 for source, t in result.seconds[query].items()}
        runs.append(result)
    return runs


def printed(argv: list[str], count: int) -> list[str]:
    """What a run with `argv` prints from its timings: the tables and, with several runs,
    the spread lines."""
    args = spark_read.parse_args([*argv, "--runs", str(count)])
    sources = spark_read.sources_of(args)
    runs = timed_runs(sources, count)
    lines = spark_read.report(runs, RECORDS, sources)
    if count > 1:
        lines += spark_read.spread_lines(runs, RECORDS)
        lines += spark_read.jvm_spread_lines(runs, RECORDS, sources)
    return lines


@pytest.mark.parametrize(
    ("without_kafka", "apache_kafka", "runs"),
    list(itertools.product([False, True], [False, True], [1, 3])),
)
def test_every_combination_prints_only_what_ran(
    without_kafka: bool, apache_kafka: bool, runs: int
) -> None:
    argv = (["--without-kafka"] if without_kafka else []) + (
        ["--apache-kafka", "127.0.0.1:26500"] if apache_kafka else []
    )
    if without_kafka and apache_kafka:
        with pytest.raises(SystemExit):
            spark_read.parse_args(argv)
        return
    lines = printed(argv, runs)
    text = "\n".join(lines)
    for line in lines:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            assert all(cells) and "-" not in cells and "nan" not in line, line
    assert "| replog / ceiling |" in lines[0]
    assert ("kafka (JVM)" in lines[0]) is not without_kafka
    assert (spark_read.NOT_RUN in lines) is without_kafka
    assert ("kafka-tuned / Parquet" in text) is not without_kafka
    assert ("apache-kafka-tuned / Parquet" in text) is apache_kafka
    assert ("replog / Apache Kafka" in text) is apache_kafka
    assert ("x Parquet (min / median / max)" in text) is (runs > 1 and not without_kafka)
    # CPU: half the wall time in each; the ceiling's over replog's is 3 / 3, 3 / 2, 3 / 1.
    if runs > 1:
        cpu = "replog 1.00 us, ceiling 1.50 us; ceiling CPU / replog CPU 1.00 / 1.50 / 3.00x"
    else:
        cpu = "replog 0.50 us, ceiling 1.50 us; ceiling CPU / replog CPU 3.00 / 3.00 / 3.00x"
    assert f"count CPU per row: {cpu}" in text
    if runs > 1:
        # replog took 1, 2 and 3 times as long in the three runs, the ceiling 3: its spread
        # of replog / ceiling is 3 / 3, 3 / 2, 3 / 1.
        assert "replog / ceiling 1.00 / 1.50 / 3.00x" in lines[-1 if without_kafka else -4]


def test_replog_against_apache_kafka_is_the_ratio_within_each_run() -> None:
    lines = printed(["--apache-kafka", "127.0.0.1:26500"], 3)
    # sources in order: replog, parquet, ceiling, kafka, kafka-tuned, apache-kafka,
    # apache-kafka-tuned took 1..7 time units: kafka / apache-kafka = 6 / 4, tuned 7 / 5.
    assert "count: kafka 1.50 / 1.50 / 1.50x; kafka-tuned 1.40 / 1.40 / 1.40x" in lines


@pytest.mark.parametrize("option", ["--runs", "--records", "--record-size", "--partitions"])
def test_counts_below_one_are_refused(option: str) -> None:
    with pytest.raises(SystemExit):
        spark_read.parse_args([option, "0"])
