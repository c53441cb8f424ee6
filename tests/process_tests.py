"""Which tests run one after the other on a worker of their own (tests/conftest.py says why).

A module's tests are process tests when it lives in PROCESS_TEST_DIRS or its source names one
of PROCESS_TEST_SIGNS (`starts_processes`), unless it is one of ANY_WORKER_MODULES: modules
those rules would group that start no node and whose assertions do not depend on the
machine's speed, which any worker takes. Process tests form groups (`worker_group`):
SINGLE_NODE_MODULES, whose tests start one node at most; Spark's (tests/spark) and one for
each of LATE_CLUSTER_MODULES, the LAST_GROUPS; and all the others (clusters).
"""

from __future__ import annotations

import functools
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PROCESS_TEST_DIRS = ("cluster", "spark", "cli")
# What a module that starts processes or listens on fixed ports says somewhere in its source.
PROCESS_TEST_SIGNS = (
    "free_port",  # and free_base_port: nodes on real ports, in this process or not
    "subprocess",
    "Popen",
    "LoopbackCluster",
    "local_cluster",
    "kafka_cluster",
    "kafka_node",
    "cli_runner",
    "SparkSession",
)

# Modules the rules above would group that need no quiet core: the processes they start, if
# any, are short-lived tools (ruff, mypy, lint-imports, the code generators, pip, a fresh
# interpreter, a small pytest session of their own), never a node, cluster, Spark or Kafka
# client, and what they assert does not depend on how fast the machine is. Any worker takes
# them (paths under tests/; tests/test_process_tests.py checks the entries).
ANY_WORKER_MODULES = frozenset(
    {
        "test_lint.py",
        "test_architecture.py",
        "test_grouped_scheduling.py",
        "test_wheel_contents.py",
        "test_docs.py",
        "test_readme.py",
        "cli/test_cli_startup.py",
        "bench/test_ci_lanes.py",
        "test_background_priority.py",
        "test_assert_rewrite_cache.py",
        "sim/test_sim_replay_across_processes.py",
        "bench/test_controller_replay_bench.py",
    }
)


def starts_processes(path: Path) -> bool:
    """Whether the module at `path` lives in PROCESS_TEST_DIRS or names a PROCESS_TEST_SIGNS."""
    relative = path.resolve().relative_to(TESTS)
    if relative.parts[0] in PROCESS_TEST_DIRS:
        return True
    source = path.read_text(encoding="utf-8")
    return any(sign in source for sign in PROCESS_TEST_SIGNS)


@functools.cache
def process_test_module(path: Path) -> bool:
    """Whether the tests of the module at `path` run on the process tests' worker (module
    docstring)."""
    relative = path.resolve().relative_to(TESTS)
    return relative.as_posix() not in ANY_WORKER_MODULES and starts_processes(path)


CLUSTER_GROUP = "clusters"
SINGLE_NODE_GROUP = "single nodes"
SPARK_GROUP = "spark"
SPARK_DIR = "spark"
# Cluster modules whose tests each start a cluster of their own and wait for outcomes with
# generous deadlines, timing no failover: slower at the lower priority, the same otherwise
# (paths under tests/; tests/test_process_tests.py checks the entries). Each is a group of its
# own, so that every worker free at the end of a run takes some; handed out longest first
# (a quiet CI run's seconds), so that no long one starts last.
LATE_CLUSTER_MODULES = (
    "cluster/test_cluster_transactions.py",  # 79 s
    "cli/test_bench_run.py",  # 58
    "test_main_job.py",  # 51
    "cluster/test_cluster_cli.py",  # 45
    "cluster/test_cluster_full_disk.py",  # 36
    "cluster/test_cluster_internal_tls.py",  # 33
    "cluster/test_cluster_topics_cli.py",  # 31
)


def late_cluster_group(module: str) -> str:
    """The group of the late cluster module `module` (a path under tests/)."""
    return f"late clusters: {module}"


# Groups handed out after every other unit, in this order (Spark's, the longest, first), and
# run at the in-process tests' lower priority (tests/background_priority.py): Spark's
# session-scoped cluster and JVM, and the clusters of LATE_CLUSTER_MODULES, then run on the
# workers the in-process tests leave, beside the clusters' lane (CI's critical path) instead
# of in it, and yield the cores whenever the clusters' nodes want them.
LAST_GROUPS = (SPARK_GROUP, *map(late_cluster_group, LATE_CLUSTER_MODULES))
# Process modules whose tests start one node process at most, never a cluster or Spark, and
# assert outcomes, not durations: their group runs beside the clusters' (paths under tests/;
# tests/test_process_tests.py checks the entries).
SINGLE_NODE_MODULES = frozenset(
    {
        "kafka/test_kafka_listener_node.py",
        "kafka/test_kafka_txn_node.py",
        "kafka/test_kafka_coordinator_client_node.py",
        "kafka/test_read_committed_node.py",
        "kafka/test_kafka_tls_node.py",
        "kafka/test_kafka_acls_node.py",
        "kafka/test_kafka_sasl_acls_node.py",
        "kafka/test_kafka_sasl_node.py",
        "kafka/test_kafka_groups_node.py",
        "kafka/test_kafka_consumer_protocol_node.py",
        "cli/test_transactions_node.py",
        "cli/test_features_node.py",
        "server/process/test_node_process.py",
    }
)


@functools.cache
def worker_group(path: Path) -> str | None:
    """The group the tests of the module at `path` run in, one after the other on one worker;
    None for a module whose tests any worker takes, one by one."""
    if not process_test_module(path):
        return None
    relative = path.resolve().relative_to(TESTS)
    if relative.parts[0] == SPARK_DIR:
        return SPARK_GROUP
    if relative.as_posix() in LATE_CLUSTER_MODULES:
        return late_cluster_group(relative.as_posix())
    return SINGLE_NODE_GROUP if relative.as_posix() in SINGLE_NODE_MODULES else CLUSTER_GROUP
