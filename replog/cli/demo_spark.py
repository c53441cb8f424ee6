"""The Spark step of `replog demo`: the committed events as a DataFrame, aggregated.

`check_prerequisites()` runs before the demo starts anything: Spark needs Java 17 or later
(`JAVA_HOME/bin/java`, else `java` on PATH) and the `spark` extra (pyspark, pyarrow); each
missing piece is one line saying what to install. `aggregate()` starts a local[2]
SparkSession, reads the topic with `spark.read.format("replog")` (earliest to the high
watermarks at planning: committed records only), parses the JSON values, prints the count
and sum of amounts per key group with `DataFrame.show()`, and returns the totals the demo
compares with its own verification.

Rules:
- The environment is fixed before the JVM starts: Spark's Python workers run this
  interpreter (`PYSPARK_PYTHON`, else they start `python3` from PATH without replog), bind to
  loopback, and find this replog (`PYTHONPATH` gains the directory holding the package, for a
  checkout run without installing).
- The JVM logs only warnings until the session exists and only errors after (a log4j2 file
  written to `SPARK_CONF_DIR` in the work directory, unless the user set one), so the demo's
  own lines are not drowned in Spark's start-up chatter.
- pyspark is imported here only, inside the functions: `replog --help` never loads it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from replog.cli.demo_events import KEY_PREFIX
from replog.errors import ReplogError

MIN_JAVA = 17
# Root at WARN: Spark treats pyspark as a shell and, when the root level differs from its
# shell default (WARN), prints "Setting default log level to ..."; the one start-up warning
# this machine shows (no native Hadoop library) is silenced; `setLogLevel("ERROR")` follows as
# soon as the session exists.
LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
logger.hadoop.name = org.apache.hadoop.util.NativeCodeLoader
logger.hadoop.level = error
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


@dataclass(frozen=True, slots=True)
class SparkTotals:
    rows: int
    total_amount: int  # cents
    seconds: float


def find_java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("java")


def java_major(version_output: str) -> int | None:
    """The major version in `java -version`'s output ("17.0.15" -> 17, "1.8.0_392" -> 8)."""
    found = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if found is None:
        return None
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major


def check_prerequisites() -> str:
    """Raise `ReplogError` (one line) unless Spark can run; describe the Java found."""
    missing = [m for m in ("pyspark", "pyarrow") if importlib.util.find_spec(m) is None]
    if missing:
        raise ReplogError(
            f"the Spark step needs {' and '.join(missing)}: install the spark extra "
            "(pip install -e '.[spark]')"
        )
    java = find_java()
    need = f"Spark needs Java {MIN_JAVA} or later (set JAVA_HOME or put java on PATH)"
    if java is None:
        raise ReplogError(f"no java found: {need}")
    try:
        probe = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ReplogError(f"{java} -version failed ({exc}): {need}") from None
    major = java_major(probe.stderr + probe.stdout)
    if major is None or major < MIN_JAVA:
        found = "an unknown version" if major is None else f"Java {major}"
        raise ReplogError(f"{java} is {found}: {need}")
    return f"{java} (Java {major})"


def _prepare_environment(work_dir: str) -> str:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    import replog

    package_root = os.path.dirname(os.path.dirname(os.path.abspath(replog.__file__)))
    paths = [package_root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    conf_dir = os.path.join(work_dir, "conf")
    os.makedirs(conf_dir, exist_ok=True)
    log_config = os.path.join(conf_dir, "log4j2.properties")
    with open(log_config, "w", encoding="utf-8") as f:
        f.write(LOG4J2)
    # spark-submit puts SPARK_CONF_DIR on the JVM's classpath, where log4j2 looks first; a
    # user's own SPARK_CONF_DIR wins.
    os.environ.setdefault("SPARK_CONF_DIR", conf_dir)
    return log_config


def start_session(work_dir: str) -> Any:
    log_config = _prepare_environment(work_dir)
    import replog.spark
    from replog.spark.local_session import local_session

    spark = local_session(
        "replog-demo",
        java_options=[f"-Dlog4j2.configurationFile=file:{log_config}"],
        scratch_dir=os.path.join(work_dir, "spark-scratch"),
    )
    replog.spark.register(spark)
    return spark


def aggregate(spark: Any, bootstrap: str, topic: str) -> SparkTotals:
    """Read `topic`, print the per-group aggregation, return the totals (module docstring)."""
    import time

    from pyspark.sql import functions as F

    started = time.monotonic()
    raw = (
        spark.read.format("replog")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    events = raw.select(
        F.from_json(F.col("value").cast("string"), "key STRING, seq LONG, amount LONG").alias("e")
    ).select("e.*")
    key_number = F.substring_index(F.col("key"), "-", -1).cast("int")
    by_group = (
        events.withColumn("key_group", F.concat(F.lit(f"{KEY_PREFIX}*"), (key_number % 10)))
        .groupBy("key_group")
        .agg(
            F.countDistinct("key").alias("keys"),
            F.count(F.lit(1)).alias("events"),
            (F.sum("amount") / 100).cast("decimal(14,2)").alias("amount"),
            F.max("seq").alias("max_seq"),
        )
        .orderBy(F.desc("amount"))
    )
    by_group.show(10, truncate=False)
    # Same plan, same ranges: a batch DataFrame is planned once, at its first action.
    totals = events.agg(F.count(F.lit(1)).alias("rows"), F.sum("amount").alias("cents")).first()
    rows = int(totals["rows"])
    cents = int(totals["cents"] or 0)
    return SparkTotals(rows, cents, time.monotonic() - started)
