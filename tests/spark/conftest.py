"""Fixtures of the Spark connector tests: one local[2] SparkSession and one replog cluster.

Both are session-scoped: a SparkSession costs 10-20 s to start plus Python-worker warm-up, a
cluster several seconds; every test uses its own topics (and `tmp_path` for checkpoints).
pyspark and pyarrow are imported directly: a missing install must fail these tests, not skip
them. The source is found by Spark's discovery (`pyspark_replog`), not registered here (see
PYTHONPATH below). The environment is fixed before Spark starts: workers must run this venv's Python
(`PYSPARK_PYTHON`, else they start `python3` from PATH without pyarrow), bind to loopback
(`SPARK_LOCAL_IP`) and use UTC.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cluster"))

ROOT = Path(__file__).resolve().parent.parent.parent

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# The checkout on the Python workers' path, where an installed replog puts `pyspark_replog`
# (site-packages): Spark's data-source discovery scans the path with pkgutil, which does not
# see modules an editable install maps. The session below does NOT call register(): every
# test using format("replog") before test_source_discovery's register test relies on
# discovery, which is how users without register() get the source.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ.setdefault("TZ", "UTC")

import pyarrow  # noqa: E402,F401  (must be installed: fail, never skip)
from client_cluster import ClientCluster, client_cluster  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

from replog.spark.local_session import local_session  # noqa: E402


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = local_session("replog-spark-tests")
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
