"""TLS on a real node's Kafka listener (`listeners=...,SSL://`, PEM files, `ssl.client.auth=
required`), driven by unmodified clients: confluent-kafka creates a topic, produces and consumes
over TLS with its client certificate; without one, or with one the node's CA did not sign, its
handshake fails; plaintext bytes sent to the TLS port close that connection and the node goes on
serving; kcat lists the cluster over TLS."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.confluent_producer import confluent_producer
from tests.eventually import wait_until
from tests.kafka.client_tools import kcat
from tests.local_ports import free_ports_in
from tests.tls_certificates import Pki

PORTS = range(34000, 35000)  # this test's range: never the defaults other runs use


def free_ports(count: int) -> list[int]:
    return free_ports_in(PORTS, count)


@dataclass
class TlsNode:
    directory: Path
    pki: Pki
    tls_port: int
    process: subprocess.Popen[bytes]

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.tls_port}"

    def client_config(self, certificate: str | None = "app", **more: Any) -> dict[str, Any]:
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.pki.truststore),
            "socket.timeout.ms": 5000,
            **more,
        }
        if certificate is not None:
            config["ssl.certificate.location"] = str(self.pki.directory / f"{certificate}.crt")
            config["ssl.key.location"] = str(self.pki.directory / f"{certificate}.key")
        return config


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsNode]:
    directory = tmp_path_factory.mktemp("tls-node")
    pki = Pki.create(directory / "pki")
    pki.keystore("app")  # the client's certificate, signed by the node's CA
    grpc_port, tls_port = free_ports(2)
    properties = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "cluster.id": "tls-node-test",
        "controller.quorum.voters": f"1@127.0.0.1:{grpc_port}",
        "listeners": f"CONTROLLER://127.0.0.1:{grpc_port},SSL://127.0.0.1:{tls_port}",
        "log.dirs": str(directory / "data"),
        "ssl.keystore.location": str(pki.keystore("broker", password=b"secret")),
        "ssl.key.password": "secret",
        "ssl.truststore.location": str(pki.truststore),
        "ssl.client.auth": "required",
        "offsets.topic.replication.factor": "1",
        # The consumer here joins its group alone: its first join need not wait 3 s for
        # members that never come.
        "group.initial.rebalance.delay.ms": "0",
    }
    config = directory / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
    with (directory / "node.log").open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "replog.cli.main", "node", "--config", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )
    running = TlsNode(directory, pki, tls_port, process)
    try:

        def serving() -> bool:
            assert process.poll() is None, (directory / "node.log").read_text()[-3000:]
            with AdminClient(running.client_config()) as admin:
                try:
                    return len(admin.list_topics(timeout=2).brokers) == 1
                except confluent_kafka.KafkaException:
                    return False

        wait_until(serving, "the node serving over TLS", timeout_s=60)
        yield running
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def test_confluent_kafka_creates_produces_and_consumes_over_tls(node: TlsNode) -> None:
    with AdminClient(node.client_config()) as admin:
        admin.create_topics([NewTopic("secured", 1, 1)])["secured"].result(timeout=30)
    with confluent_producer(node.client_config(acks="all")) as producer:
        for i in range(10):
            producer.produce("secured", f"value-{i}".encode(), key=f"k{i}".encode())
        assert producer.flush(30) == 0
    with confluent_kafka.Consumer(
        node.client_config(**{"group.id": "tls", "auto.offset.reset": "earliest"})
    ) as consumer:
        consumer.subscribe(["secured"])
        values = []
        deadline = time.monotonic() + 60
        while len(values) < 10 and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and not message.error():
                values.append(message.value())
    assert values == [f"value-{i}".encode() for i in range(10)]


@pytest.mark.parametrize("certificate", [None, "stranger"])
def test_a_client_without_a_certificate_the_ca_signed_is_refused(
    node: TlsNode, tmp_path: Path, certificate: str | None
) -> None:
    config = node.client_config(certificate=None)
    if certificate is not None:
        other = Pki.create(tmp_path / "other")  # a CA the node does not trust
        other.keystore(certificate)
        config["ssl.certificate.location"] = str(other.directory / f"{certificate}.crt")
        config["ssl.key.location"] = str(other.directory / f"{certificate}.key")
    with AdminClient(config) as refused, pytest.raises(confluent_kafka.KafkaException):
        refused.list_topics(timeout=5)


def test_plaintext_bytes_to_the_tls_port_close_that_connection_only(node: TlsNode) -> None:
    with socket.create_connection(("127.0.0.1", node.tls_port), timeout=10) as plain:
        # An ApiVersions v0 request, as a PLAINTEXT client would send it.
        plain.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")
        with contextlib.suppress(ConnectionResetError):
            assert plain.recv(1024)[:1] in (b"", b"\x15")  # closed, or a TLS alert
    with AdminClient(node.client_config()) as admin:
        assert len(admin.list_topics(timeout=10).brokers) == 1
    assert node.process.poll() is None


def test_kcat_lists_the_cluster_over_tls(node: TlsNode) -> None:
    tool = kcat()
    listed = tool.run(
        "-b",
        node.bootstrap,
        "-X",
        "security.protocol=SSL",
        "-X",
        f"ssl.ca.location={node.pki.truststore}",
        "-X",
        f"ssl.certificate.location={node.pki.directory / 'app.crt'}",
        "-X",
        f"ssl.key.location={node.pki.directory / 'app.key'}",
        "-L",
    )
    assert "1 brokers:" in listed and f"127.0.0.1:{node.tls_port}" in listed


def test_tls_connections_end_without_warnings(node: TlsNode) -> None:
    # Run last in this module: every connection above has closed by now (their clients ended,
    # some at their handshake, one with plaintext bytes).
    warned = [
        line
        for line in (node.directory / "node.log").read_text(errors="replace").splitlines()
        if " WARNING " in line or " ERROR " in line
    ]
    assert warned == []
