"""Which worker a test module goes to (tests/process_tests.py): the modules that start clusters
form one group, Spark's a group and each of LATE_CLUSTER_MODULES one, handed out last, those
that start a single node another; each of ANY_WORKER_MODULES is a module the rules would
otherwise group that starts no node, cluster, Spark or Kafka client, and each of
SINGLE_NODE_MODULES a process module that starts no cluster."""

from __future__ import annotations

import pytest

from tests.process_tests import (
    ANY_WORKER_MODULES,
    CLUSTER_GROUP,
    LAST_GROUPS,
    LATE_CLUSTER_MODULES,
    SINGLE_NODE_GROUP,
    SINGLE_NODE_MODULES,
    SPARK_GROUP,
    TESTS,
    late_cluster_group,
    process_test_module,
    starts_processes,
    worker_group,
)

# What a module that runs a server or a Kafka client for its tests says in its source.
SERVER_SIGNS = (
    "LoopbackCluster",
    "running_node",
    "start_client_cluster",
    "local_cluster(",
    "start_node(",
    "free_base_port",
    "Popen(",
    "SparkSession.builder",
    "confluent_kafka",
    "KafkaProducer",
)
# What a module that starts a cluster or Spark says in its source.
CLUSTER_SIGNS = (
    "LoopbackCluster",
    "client_cluster",
    "kafka_cluster",
    "local_cluster(",
    "SparkSession",
    '"cluster", "start"',
)


@pytest.mark.parametrize("module", sorted(ANY_WORKER_MODULES))
def test_each_any_worker_module_exists_would_be_grouped_and_starts_no_server(module: str) -> None:
    path = TESTS / module
    assert path.is_file(), f"{module} is listed but does not exist"
    assert starts_processes(path), f"{module} is listed but the rules would not group it anyway"
    assert not process_test_module(path)
    source = path.read_text(encoding="utf-8")
    assert [sign for sign in SERVER_SIGNS if sign in source] == []


@pytest.mark.parametrize(
    "module",
    [
        "cluster/test_cluster_soak.py",
        "kafka/test_kafka_clients.py",
        "cli/test_cli_console.py",
    ],
)
def test_modules_that_start_clusters_form_one_group(module: str) -> None:
    assert worker_group(TESTS / module) == CLUSTER_GROUP


@pytest.mark.parametrize("module", ["spark/test_source_batch.py", "spark/test_sink.py"])
def test_sparks_modules_form_a_group_handed_out_last(module: str) -> None:
    assert worker_group(TESTS / module) == SPARK_GROUP
    assert SPARK_GROUP in LAST_GROUPS


@pytest.mark.parametrize("module", sorted(LATE_CLUSTER_MODULES))
def test_each_late_cluster_module_exists_and_forms_a_group_handed_out_last(module: str) -> None:
    path = TESTS / module
    assert path.is_file(), f"{module} is listed but does not exist"
    assert process_test_module(path)
    assert worker_group(path) == late_cluster_group(module)
    assert worker_group(path) in LAST_GROUPS


@pytest.mark.parametrize("module", sorted(SINGLE_NODE_MODULES))
def test_each_single_node_module_exists_is_a_process_module_and_starts_no_cluster(
    module: str,
) -> None:
    path = TESTS / module
    assert path.is_file(), f"{module} is listed but does not exist"
    assert process_test_module(path)
    assert worker_group(path) == SINGLE_NODE_GROUP
    source = path.read_text(encoding="utf-8")
    assert [sign for sign in CLUSTER_SIGNS if sign in source] == []


def test_an_in_process_module_is_not_grouped() -> None:
    assert worker_group(TESTS / "record" / "test_record_keyless.py") is None
    assert worker_group(TESTS / "test_lint.py") is None
