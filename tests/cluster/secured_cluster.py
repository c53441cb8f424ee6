"""Shared by the tests of `replog cluster start --security ssl` and `sasl_ssl`: a one-node
secured cluster, the client.properties it writes and what reads it (`replog` commands with
`--command-config`, confluent-kafka, `kcat -F`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import confluent_kafka
from cluster_helpers import LoopbackCluster, replog
from confluent_kafka.admin import AdminClient

from replog.config import parse_properties
from tests.confluent_producer import confluent_producer
from tests.kafka.client_tools import kcat
from tests.local_ports import KAFKA_PORT_OFFSET, free_base_port


@contextmanager
def secured_cluster(directory: Path, security: str) -> Iterator[tuple[LoopbackCluster, str]]:
    """A one-node cluster started with `--security security`; with the start's output."""
    cluster = LoopbackCluster(directory / "cluster", free_base_port(1), node_count=1)
    try:
        started = cluster.start("--security", security)
        assert "--command-config" in started.stdout, started.stdout
        yield cluster, started.stdout + started.stderr
    finally:
        cluster.kill_everything()


def client_properties(cluster: LoopbackCluster) -> Path:
    return cluster.data_dir / "client.properties"


def settings(cluster: LoopbackCluster, **more: object) -> dict[str, object]:
    text = client_properties(cluster).read_text()
    return {**parse_properties(text, source="client.properties"), **more}


def cli(cluster: LoopbackCluster, *args: str, stdin: str | None = None) -> str:
    result = replog(*args, "--command-config", str(client_properties(cluster)), stdin=stdin)
    assert result.returncode == 0, f"replog {' '.join(args)}: {result.stderr}"
    return result.stdout


def confluent_kafka_and_kcat_round_trip(cluster: LoopbackCluster) -> None:
    """confluent-kafka creates `audit` and writes to it with the settings as they are; `kcat -F`
    lists the cluster and reads the record back."""
    config = settings(cluster)
    with AdminClient(config) as admin:  # open until answered: a destroyed handle fails its futures
        admin.create_topics([confluent_kafka.admin.NewTopic("audit", 1, 1)])["audit"].result(30)
    with confluent_producer(config) as producer:
        producer.produce("audit", b"seen", key=b"k")
        assert producer.flush(30) == 0
    listed = kcat().run("-F", str(client_properties(cluster)), "-L")
    assert "1 brokers:" in listed and 'topic "audit"' in listed, listed
    read = kcat().run(
        "-F", str(client_properties(cluster)), "-C", "-t", "audit", "-o", "beginning",
        "-e", "-f", "%k:%s\n",
    )  # fmt: skip
    assert read.split() == ["k:seen"]


def status_names_its_files(cluster: LoopbackCluster, security: str) -> Path:
    """`cluster status --json` names the security mode and both client files; the Java one."""
    status = json.loads(cluster.ask("status", "--json").stdout)
    assert status["security"] == security
    assert status["client_config"] == str(client_properties(cluster))
    java = cluster.data_dir / "client-java.properties"
    assert status["java_client_config"] == str(java)
    assert status["bootstrap_servers"] == f"127.0.0.1:{cluster.base_port + KAFKA_PORT_OFFSET}"
    return java
