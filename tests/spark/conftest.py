"""Fixtures of the Spark connector tests: one local[2] SparkSession and one replog cluster.

Both are session-scoped: a SparkSession costs 10-20 s to start plus Python-worker warm-up, a
cluster several seconds; every test uses its own topics (and `tmp_path` for checkpoints).
pyspark and pyarrow are imported directly: a missing install must fail these tests, not skip
them. The source is found by Spark's discovery (`pyspark_replog`, as this venv's install of
replog exposes it), not registered here. The environment is fixed before Spark starts: workers
must run this venv's Python (`PYSPARK_PYTHON`, else they start `python3` from PATH without
pyarrow), bind to loopback (`SPARK_LOCAL_IP`) and use UTC. Spark's own Kafka source is not on
its class path: it brings Apache Kafka's client jar from Maven, which CI does not depend on
(bench/spark_kafka_source_check.py compares `format("kafka")` with `format("replog")`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cluster"))

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# The session below does NOT call register(): every test using format("replog") before
# test_source_discovery's register test relies on discovery, which is how users without
# register() get the source. Spark's workers see only what this venv's install puts on the path
# (pytest's own `pythonpath` reaches this process, not them), so an install made before
# pyproject.toml's `package-dir` (an editable finder that hides pyspark_replog) fails here, in
# one line, rather than as DATA_SOURCE_NOT_FOUND in every Spark test.
_VISIBLE = subprocess.run(
    [
        sys.executable,
        "-c",
        "import pkgutil; print('pyspark_replog' in {m.name for m in pkgutil.iter_modules()})",
    ],
    env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    cwd="/",
    capture_output=True,
    text=True,
    check=True,
).stdout.strip()
if _VISIBLE != "True":
    raise pytest.UsageError(
        "Spark's workers cannot discover pyspark_replog in this venv: reinstall replog "
        "(.venv/bin/pip install -e '.[dev]')"
    )
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ.setdefault("TZ", "UTC")

import pyarrow  # noqa: E402,F401  (must be installed: fail, never skip)
from client_cluster import ClientCluster, client_cluster  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

from replog.spark.local_session import local_session  # noqa: E402


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    scratch = str(tmp_path_factory.mktemp("spark-scratch"))
    session = local_session("replog-spark-tests", scratch_dir=scratch)
    try:
        yield session
    finally:
        for query in session.streams.active:
            query.stop()
        session.stop()


@pytest.fixture(scope="session")
def replog_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientCluster]:
    """A 3-node cluster for every Spark test; tests create their own topics."""
    with client_cluster(tmp_path_factory.mktemp("spark-cluster")) as cluster:
        yield cluster
