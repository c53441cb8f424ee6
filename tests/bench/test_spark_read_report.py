"""bench/spark_read.py's report for every combination of its source options: no empty or
"-" cells, CPU per row and ceiling CPU / replog CPU beside the wall-time figures, the Kafka
columns and table only when the JVM source ran (else one line saying it did not), replog /
Apache Kafka only with `--apache-kafka`, and the options that contradict each other refused;
the back-to-back pairs' figures (replog / ceiling per pair, CPU per row by process group,
replog's own CPU) only when pairs were timed; CPU by group from /proc, each process counted
once, a process that ended in between never below zero."""

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


def paired_runs(count: int, pairs: int) -> list:  # type: ignore[type-arg]
    """`count` runs of `pairs` pairs per query: pair k of run r took the ceiling 1 s and replog
    1 + (r * pairs + k) / 10 s; CPU: replog 2 s in the workers, 1 s in the JVM, 0.5 s in the
    nodes; the ceiling 1 s, 1 s, 0.1 s."""
    runs = timed_runs(["replog", "parquet", "ceiling"], count)
    for r, result in enumerate(runs):
        for query in spark_read.QUERIES:
            result.pairs[query] = [
                spark_read.Pair(
                    "replog" if k % 2 == 0 else "ceiling",
                    {"replog": 1 + (r * pairs + k) / 10, "ceiling": 1.0},
                    {
                        "replog": {"workers": 2.0, "jvm": 1.0, "nodes": 0.5, "driver": 0.0},
                        "ceiling": {"workers": 1.0, "jvm": 1.0, "nodes": 0.1, "driver": 0.0},
                    },
                )
                for k in range(pairs)
            ]
    return runs


def test_pairs_give_the_ratio_per_pair_and_the_cpu_per_group() -> None:
    lines = spark_read.pair_lines(paired_runs(2, 3), RECORDS)
    text = "\n".join(lines)
    # Six pairs: replog took 1.0 .. 1.5 s against the ceiling's 1 s (median of 1 / 1.2 and
    # 1 / 1.3: 0.80).
    assert "6 pairs in 2 run(s)" in text
    assert (
        "count: 0.67 / 0.80 / 1.00x; replog 1.00 / 1.25 / 1.50 s, ceiling 1.00 / 1.00 / 1.00 s"
        in lines
    )
    # CPU per row in us: seconds / 1M rows * 1e6.
    assert "| count | replog | 2.000 | 1.000 | 0.500 | 0.000 | 3.500 |" in lines
    assert "| count | ceiling | 1.000 | 1.000 | 0.100 | 0.000 | 2.100 |" in lines
    assert "count 0.60 / 0.60 / 0.60x" in lines[-2]
    # replog's own: (2 + 0.5) - (1 + 0.1) CPU seconds per million rows.
    assert "count 1.40 / 1.40 / 1.40;" in lines[-1]
    # Runs without pairs (an older JSON, or none timed) print none of this.
    assert spark_read.pair_lines(timed_runs(["replog", "ceiling"], 2), RECORDS) == []


def test_pairs_default_to_five_and_one_when_quick() -> None:
    assert spark_read.parse_args([]).pairs == 5
    assert spark_read.parse_args(["--quick"]).pairs == 1
    with pytest.raises(SystemExit):
        spark_read.parse_args(["--pairs", "0"])


def test_cpu_used_by_group_counts_each_process_once_and_never_below_zero() -> None:
    import os
    import subprocess
    import sys

    burn = (
        "import time\nt = time.process_time()\n"
        "while time.process_time() - t < 0.3: pass\nprint(flush=True)\ninput()"
    )
    driver = os.getpid()
    busy = subprocess.Popen(
        [sys.executable, "-c", burn], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        started = spark_read.cpu_reading(driver, [busy.pid])
        assert busy.stdout is not None
        busy.stdout.readline()  # its 0.3 s of CPU are spent
        burnt = spark_read.cpu_reading(driver, [busy.pid])
        used = spark_read.cpu_used(started, burnt)
        assert used["nodes"] >= 0.2  # the child, named as a node
        # Per process, not per group: the test process may have a Spark JVM of an earlier
        # test below it (a session's), whose CPU the "jvm" and "workers" groups then count.
        assert burnt[busy.pid][0] == "nodes"
        # Not named as a node: a process the driver started, in the driver's group.
        unnamed = spark_read.cpu_reading(driver, [])
        assert unnamed[busy.pid][0] == "driver" and unnamed[busy.pid][1] >= 0.25
        assert spark_read.cpu_used({}, unnamed)["nodes"] == 0.0
    finally:
        busy.communicate(b"\n")
    # A process that ended between two readings is left out: nothing negative.
    ended = spark_read.cpu_used(burnt, spark_read.cpu_reading(driver, [busy.pid]))
    assert all(seconds >= 0.0 for seconds in ended.values())
    assert ended["nodes"] == 0.0


def test_the_ceiling_yields_the_topics_rows_and_does_no_work_first() -> None:
    import time

    from pyspark.sql.datasource import InputPartition

    options = {"records": "200000", "recordsize": "100", "partitions": "3"}
    reader = spark_read.ceiling_source()(options).reader(None)
    list(reader.read(InputPartition(0)))  # a worker's first task: its imports
    started = time.thread_time()
    batches = reader.read(InputPartition(1))
    first = next(batches)
    # Its one batch is built by numpy: about 1.4 ms of CPU (a list of keys and os.urandom for
    # every value took 30).
    assert time.thread_time() - started < 0.012
    rows = [first, *batches]
    assert sum(b.num_rows for b in rows) == len(range(1, 200_000, 3))
    keys = first.column("key").to_pylist()
    assert keys[:3] == [b"key-00", b"key-01", b"key-02"] and keys[250] == b"key-50"
    assert {len(v) for v in first.column("value").to_pylist()} == {100}
    assert first.column("topic")[0].as_py() == spark_read.TOPIC
    assert first.column("partition")[0].as_py() == 1


def test_the_cluster_s_bootstrap_is_its_kafka_listeners() -> None:
    """replog's source and Spark's Kafka source both read the bench cluster through the
    brokers' Kafka listeners (base port + 200 + i - 1)."""
    cluster = spark_read.Cluster("/nonexistent", 47000)
    assert cluster.bootstrap == "127.0.0.1:47200,127.0.0.1:47201,127.0.0.1:47202"
