"""A local SparkSession (`local[2]`) set up the way replog's own users of Spark want it.

The demo, the Spark tests and the read benchmark each run one on this 2-core machine; they share
these settings so that a fix (a time zone, a quieter log) reaches all three:
- no UI and no console progress bar (they fight with our own progress lines);
- 2 shuffle partitions and 2 default tasks (the 200 defaults are for clusters);
- UTC for Spark SQL and for the JVM, so timestamps print the same everywhere;
- Spark's log level ERROR once the session exists;
- `scratch_dir`, when given, holds Spark's and its JVM's temporary files (`spark.local.dir`,
  `java.io.tmpdir`): a JVM killed before its shutdown hooks ran leaves its `blockmgr-*` and
  `artifacts-*` directories there, in the caller's tree, not in /tmp for good.
`fast_start` trades peak JVM speed for start-up time (serial GC, C1 compiler only): right for
short jobs and tests, wrong for a benchmark.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

FAST_START_JAVA_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


def local_session(
    app_name: str,
    *,
    driver_memory: str = "1g",
    fast_start: bool = True,
    java_options: Sequence[str] = (),
    jars: Sequence[str] = (),
    scratch_dir: str | None = None,
) -> Any:
    """The SparkSession `app_name` on `local[2]` (module docstring), created or reused;
    `jars` go on its class path (`spark.jars`), e.g. Spark's Kafka source (`kafka_jars`);
    `scratch_dir` (made if missing) takes its temporary files."""
    from pyspark.sql import SparkSession

    options = ["-Duser.timezone=UTC", *java_options]
    if fast_start:
        options += FAST_START_JAVA_OPTIONS
    builder = SparkSession.builder
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    if scratch_dir is not None:
        os.makedirs(scratch_dir, exist_ok=True)
        options.append(f"-Djava.io.tmpdir={scratch_dir}")
        builder = builder.config("spark.local.dir", scratch_dir)
    session = (
        builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", " ".join(options))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session
