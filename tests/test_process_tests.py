"""Which worker a test module goes to (tests/process_tests.py): the modules that start nodes stay
on the process tests' worker, and each of ANY_WORKER_MODULES is a module the rules would
otherwise group that starts no node, cluster, Spark or Kafka client."""

from __future__ import annotations

import pytest

from tests.process_tests import ANY_WORKER_MODULES, TESTS, process_test_module, starts_processes

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
        "kafka/test_kafka_listener_node.py",
        "spark/test_source_batch.py",
        "test_main_job.py",
        "cli/test_cli_console.py",
    ],
)
def test_modules_that_start_nodes_run_on_the_process_tests_worker(module: str) -> None:
    assert process_test_module(TESTS / module)


def test_an_in_process_module_is_not_grouped() -> None:
    assert not process_test_module(TESTS / "record" / "test_record_keyless.py")
