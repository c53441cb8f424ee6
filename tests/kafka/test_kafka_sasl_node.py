"""SASL on a real node's Kafka listeners (SASL_PLAINTEXT, SASL_SSL with certificates made here),
driven by unmodified clients and replog's own: PLAIN against the listener's JAAS users, SCRAM
against credentials written with `replog configs --entity-type users` through the controller;
wrong passwords and unknown users refused with Kafka's error, one log line and a counted
failure each, the node serving on; re-authentication (KIP-368); credentials after a restart."""

from __future__ import annotations

import asyncio
import socket
import struct
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiokafka
import aiokafka.helpers
import confluent_kafka
import kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.confluent_producer import confluent_producer
from tests.eventually import wait_until
from tests.kafka.client_tools import kcat
from tests.local_ports import free_ports_in
from tests.node_process import run_replog, start_node, stop_node
from tests.tls_certificates import Pki

PORTS = range(41000, 42000)  # this test's range: never the defaults other runs use
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_alice="alice-plain" user_admin="admin-plain";'
)
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_PASSWORD = "alice-scram"
REAUTH_MS = 2000
ALTER_ALICE = ("configs", "alter", "--entity-type", "users", "--entity-name", "alice")
PASSWORDS = {
    "PLAIN": "alice-plain",
    "SCRAM-SHA-256": SCRAM_PASSWORD,
    "SCRAM-SHA-512": SCRAM_PASSWORD,
}


def free_ports(count: int) -> list[int]:
    return free_ports_in(PORTS, count)


@dataclass
class SaslNode:
    directory: Path
    pki: Pki
    ports: dict[str, int]
    process: subprocess.Popen[bytes] | None = None

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def log(self) -> str:
        return (self.directory / "node.log").read_text(errors="replace")

    def config(
        self,
        listener: str,
        mechanism: str,
        user: str = "alice",
        password: str | None = None,
        **more: Any,
    ) -> dict[str, Any]:
        config: dict[str, Any] = {
            "bootstrap.servers": self.address(listener),
            "security.protocol": "SASL_SSL" if listener == "SASL_SSL" else "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": PASSWORDS[mechanism] if password is None else password,
            "socket.timeout.ms": 5000,
            **more,
        }
        if listener == "SASL_SSL":
            config["ssl.ca.location"] = str(self.pki.truststore)
        return config

    def start(self) -> None:
        self.process = start_node(self.directory / "server.properties", self.directory / "node.log")

        def serving() -> bool:
            assert self.process is not None and self.process.poll() is None, self.log()[-3000:]
            with AdminClient(
                {"bootstrap.servers": self.address("PLAINTEXT"), "socket.timeout.ms": 2000}
            ) as admin:
                try:
                    return len(admin.list_topics(timeout=2).brokers) == 1
                except confluent_kafka.KafkaException:
                    return False

        wait_until(serving, "the node serving", timeout_s=60)

    def stop(self) -> None:
        if self.process is not None:
            stop_node(self.process)
            self.process = None

    def replog(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_replog(*args, "--bootstrap-server", self.address("PLAINTEXT"))

    def failed_authentications(self) -> float:
        text = (
            urllib.request.urlopen(f"http://127.0.0.1:{self.ports['METRICS']}/metrics", timeout=10)
            .read()
            .decode()
        )
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("replog_failed_authentication_total{")
        )


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslNode]:
    directory = tmp_path_factory.mktemp("sasl-node")
    pki = Pki.create(directory / "pki")
    names = ("CONTROLLER", "PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "REAUTH", "METRICS")
    ports = dict(zip(names, free_ports(len(names)), strict=True))
    listeners = ",".join(f"{n}://127.0.0.1:{ports[n]}" for n in names[:-1])
    properties = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "cluster.id": "sasl-node-test",
        "controller.quorum.voters": f"1@127.0.0.1:{ports['CONTROLLER']}",
        "listeners": listeners,
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
        "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,REAUTH:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "listener.name.reauth.plain.sasl.jaas.config": JAAS,
        "listener.name.reauth.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.reauth.plain.connections.max.reauth.ms": str(REAUTH_MS),
        "listener.name.reauth.scram-sha-512.connections.max.reauth.ms": str(REAUTH_MS),
        "log.dirs": str(directory / "data"),
        "ssl.keystore.location": str(pki.keystore("broker")),
        "ssl.truststore.location": str(pki.truststore),
        "offsets.topic.replication.factor": "1",
        # Each consumer here joins its group alone: its first join need not wait 3 s for
        # members that never come.
        "group.initial.rebalance.delay.ms": "0",
        "metrics.port": str(ports["METRICS"]),
    }
    (directory / "server.properties").write_text(
        "".join(f"{k}={v}\n" for k, v in properties.items())
    )
    running = SaslNode(directory, pki, ports)
    try:
        running.start()
        # Two mechanisms of one user in one request: Kafka's DUPLICATE_RESOURCE, as from
        # kafka-configs.sh against a KRaft cluster; one request each is accepted.
        both = running.replog(
            *ALTER_ALICE,
            "--add-config",
            f"SCRAM-SHA-256=[iterations=8192,password={SCRAM_PASSWORD}],"
            f"SCRAM-SHA-512=[password={SCRAM_PASSWORD}]",
        )
        assert both.returncode == 1
        assert "cannot be altered twice in the same request" in both.stderr
        for config in (
            f"SCRAM-SHA-256=[iterations=8192,password={SCRAM_PASSWORD}]",
            f"SCRAM-SHA-512=[password={SCRAM_PASSWORD}]",
        ):
            created = running.replog(*ALTER_ALICE, "--add-config", config)
            assert created.returncode == 0, created.stderr
            assert created.stdout == "Completed updating config for user alice.\n"
        with AdminClient({"bootstrap.servers": running.address("PLAINTEXT")}) as admin:
            admin.create_topics([NewTopic("sasl", 1, 1)])["sasl"].result(timeout=30)
        yield running
    finally:
        running.stop()


def round_trip_confluent(node: SaslNode, listener: str, mechanism: str, tag: str) -> None:
    with confluent_producer(node.config(listener, mechanism, acks="all")) as producer:
        for i in range(5):
            producer.produce("sasl", f"{tag}-{i}".encode())
        assert producer.flush(30) == 0
    with confluent_kafka.Consumer(
        node.config(listener, mechanism, **{"group.id": tag, "auto.offset.reset": "earliest"})
    ) as consumer:
        consumer.subscribe(["sasl"])
        seen: list[bytes] = []
        deadline = time.monotonic() + 60
        while not {f"{tag}-{i}".encode() for i in range(5)} <= set(seen):
            assert time.monotonic() < deadline, seen
            message = consumer.poll(1)
            if message is not None and not message.error():
                seen.append(message.value())


def test_the_cli_describes_the_scram_users(node: SaslNode) -> None:
    described = node.replog("configs", "describe", "--entity-type", "users")
    assert described.returncode == 0, described.stderr
    assert described.stdout == (
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n"
    )
    unknown = node.replog("configs", "describe", "--entity-type", "users", "--entity-name", "bob")
    assert unknown.stdout == (
        "Error retrieving SCRAM credential configs for user-principal 'bob': "
        "ResourceNotFoundException: "
        "Attempt to describe a user credential that does not exist: bob\n"
    )


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_produces_and_consumes(
    node: SaslNode, listener: str, mechanism: str
) -> None:
    round_trip_confluent(node, listener, mechanism, f"confluent-{listener}-{mechanism}")


def python_client_settings(node: SaslNode, listener: str, mechanism: str) -> dict[str, Any]:
    """kafka-python's and aiokafka's settings for alice on `listener` (TLS added by each)."""
    return {
        "bootstrap_servers": node.address(listener),
        "security_protocol": "SASL_SSL" if listener == "SASL_SSL" else "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": "alice",
        "sasl_plain_password": PASSWORDS[mechanism],
    }


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_produces_and_consumes(node: SaslNode, listener: str, mechanism: str) -> None:
    settings = python_client_settings(node, listener, mechanism)
    if listener == "SASL_SSL":
        settings.update(ssl_cafile=str(node.pki.truststore), ssl_check_hostname=True)
    tag = f"kafka-python-{listener}-{mechanism}".encode()
    producer: Any = kafka.KafkaProducer(acks="all", **settings)
    try:
        offset = producer.send("sasl", tag).get(timeout=30).offset
    finally:
        producer.close(timeout=10)
    consumer: Any = kafka.KafkaConsumer(**settings)
    try:
        partition = kafka.TopicPartition("sasl", 0)
        consumer.assign([partition])
        consumer.seek(partition, offset)
        deadline = time.monotonic() + 30
        values: list[bytes] = []
        while not values:
            assert time.monotonic() < deadline
            for records in consumer.poll(timeout_ms=500).values():
                values += [r.value for r in records]
        assert values[0] == tag
    finally:
        consumer.close()


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_aiokafka_produces_and_consumes(node: SaslNode, listener: str, mechanism: str) -> None:
    settings = python_client_settings(node, listener, mechanism)
    if listener == "SASL_SSL":
        settings["ssl_context"] = aiokafka.helpers.create_ssl_context(
            cafile=str(node.pki.truststore)
        )
    tag = f"aiokafka-{listener}-{mechanism}".encode()

    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(acks="all", **settings)
        await producer.start()
        try:
            sent = await producer.send_and_wait("sasl", tag)
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(enable_auto_commit=False, **settings)
        await consumer.start()
        try:
            partition = aiokafka.TopicPartition("sasl", 0)
            consumer.assign([partition])
            consumer.seek(partition, sent.offset)
            async with asyncio.timeout(30):
                record = await consumer.getone()
            assert record.value == tag
        finally:
            await consumer.stop()

    asyncio.run(run())


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_replog_client_produces_and_consumes(node: SaslNode, listener: str, mechanism: str) -> None:
    from replog import Consumer, Producer

    settings = node.config(listener, mechanism)
    del settings["socket.timeout.ms"]
    tag = f"replog-{listener}-{mechanism}".encode()
    with Producer(settings) as producer:
        offset = producer.send("sasl", tag).get(timeout=30).offset
    with Consumer(config=settings) as consumer:
        from replog.common import TopicPartition

        partition = TopicPartition("sasl", 0)
        consumer.assign([partition])
        consumer.seek(partition, offset)
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while not values:
            assert time.monotonic() < deadline
            for records in consumer.poll(timeout_ms=500).values():
                values += [r.value for r in records]
    assert values[0] == tag


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_replog_async_client_authenticates(node: SaslNode, listener: str) -> None:
    from replog.aio import Admin, Consumer, Producer
    from replog.common import TopicPartition

    settings = node.config(listener, "SCRAM-SHA-256")
    del settings["socket.timeout.ms"]  # librdkafka's name; replog's is request.timeout.ms
    tag = f"replog-aio-{listener}".encode()

    async def run() -> tuple[list[str], bytes]:
        async with Admin(settings) as admin:
            topics = sorted(await admin.list_topics())
        async with Producer(settings) as producer:
            offset = (await producer.send("sasl", tag)).offset
        async with Consumer(config=settings) as consumer:
            partition = TopicPartition("sasl", 0)
            consumer.assign([partition])
            consumer.seek(partition, offset)
            async with asyncio.timeout(30):
                while True:
                    for records in (await consumer.poll(timeout_ms=500)).values():
                        return topics, records[0].value

    topics, value = asyncio.run(run())
    assert "sasl" in topics and value == tag


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("mallory", SCRAM_PASSWORD)])
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_a_wrong_password_or_unknown_user_is_refused_logged_and_counted(
    node: SaslNode, user: str, password: str, mechanism: str
) -> None:
    before = node.failed_authentications()
    log_size = len(node.log())
    # replog's client: Kafka's error, not retried.
    from replog import Producer
    from replog.errors import SaslAuthenticationFailedError

    settings = node.config("SASL_PLAINTEXT", mechanism, user=user, password=password)
    del settings["socket.timeout.ms"]
    with (
        pytest.raises(SaslAuthenticationFailedError, match="failed"),
        Producer(settings, max_block_ms=10_000) as producer,
    ):
        producer.send("sasl", b"never").get(timeout=30)
    # confluent-kafka: librdkafka's authentication error, with the broker's message.
    errors: list[Any] = []
    config = node.config("SASL_PLAINTEXT", mechanism, user=user, password=password)
    # Destroyed when the block ends, not when this frame is freed: the refusal raised through
    # replog's producer above is kept by a future whose traceback reaches back to this frame, a
    # reference cycle that only the garbage collector breaks.
    with AdminClient({**config, "error_cb": errors.append}) as refused:
        with pytest.raises(confluent_kafka.KafkaException):
            refused.list_topics(timeout=5)
        refused.poll(1)  # serves the error callback
    assert any(
        e.code() == confluent_kafka.KafkaError._AUTHENTICATION
        and "Authentication failed" in e.str()
        for e in errors
    ), errors
    wait_until(
        lambda: node.failed_authentications() >= before + 2, "the failures counted", timeout_s=10
    )
    lines = [
        line
        for line in node.log()[log_size:].splitlines()
        if "authentication with" in line and "failed" in line
    ]
    assert lines and all("closing connection from 127.0.0.1:" in line for line in lines), lines
    assert all(password not in line for line in lines)
    round_trip_confluent(node, "SASL_PLAINTEXT", "PLAIN", f"after-refusal-{user}-{mechanism}")


def test_an_unknown_mechanism_is_refused(node: SaslNode) -> None:
    from replog.errors import UnsupportedSaslMechanismError
    from replog.wire.kafka_connection import KafkaConnection
    from replog.wire.sasl_authentication import SaslCredentials

    async def run() -> None:
        with pytest.raises(UnsupportedSaslMechanismError, match="it enables: PLAIN, SCRAM-SHA-512"):
            await KafkaConnection.open(
                node.address("REAUTH"),
                client_id="test",
                setup_timeout_ms=10_000,
                sasl=SaslCredentials("SCRAM-SHA-256", "alice", SCRAM_PASSWORD),
            )

    asyncio.run(run())


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kcat_lists_the_cluster_over_sasl_ssl(node: SaslNode, mechanism: str) -> None:
    listed = kcat().run(
        "-b",
        node.address("SASL_SSL"),
        "-X",
        "security.protocol=SASL_SSL",
        "-X",
        f"ssl.ca.location={node.pki.truststore}",
        "-X",
        f"sasl.mechanisms={mechanism}",
        "-X",
        "sasl.username=alice",
        "-X",
        f"sasl.password={PASSWORDS[mechanism]}",
        "-L",
    )
    assert "1 brokers:" in listed and node.address("SASL_SSL") in listed


def frame(api_key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation_id, -1)
    return struct.pack(">i", len(header) + len(body)) + header + body


def read_frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    return sock.recv(size, socket.MSG_WAITALL)


def test_requests_before_authentication_close_the_connection(node: SaslNode) -> None:
    with socket.create_connection(("127.0.0.1", node.ports["SASL_PLAINTEXT"]), timeout=10) as sock:
        sock.sendall(frame(3, 1, 7, struct.pack(">i", 0)))  # Metadata v1, no topics
        assert sock.recv(1024) == b""  # closed unanswered, as Kafka's broker does
    with socket.create_connection(("127.0.0.1", node.ports["SASL_PLAINTEXT"]), timeout=10) as sock:
        sock.sendall(frame(36, 1, 8, struct.pack(">i", 0)))  # SaslAuthenticate first
        answer = read_frame(sock)
        assert struct.unpack(">ih", answer[:6]) == (8, 34)  # ILLEGAL_SASL_STATE
        assert sock.recv(1024) == b""


def test_a_session_is_renewed_by_re_authentication_and_an_expired_one_closed(
    node: SaslNode,
) -> None:
    # librdkafka re-authenticates on its own (KIP-368): a producer outliving several sessions.
    log_size = len(node.log())
    with confluent_producer(node.config("REAUTH", "SCRAM-SHA-512", acks="all")) as producer:
        deadline = time.monotonic() + 3 * REAUTH_MS / 1000
        sent = 0
        while time.monotonic() < deadline:
            producer.produce("sasl", f"reauth-{sent}".encode())
            sent += 1
            producer.flush(10)
            time.sleep(0.2)
        assert producer.flush(30) == 0 and sent > 10
        # replog's client renews its connection before the session ends.
        from replog import Producer

        settings = node.config("REAUTH", "PLAIN")
        del settings["socket.timeout.ms"]
        with Producer(settings) as replog_producer:
            for i in range(4):
                replog_producer.send("sasl", f"replog-reauth-{i}".encode()).get(timeout=30)
                time.sleep(REAUTH_MS / 1000 * 0.6)

        # Neither met the end of a session: librdkafka re-authenticated on its connection,
        # replog's client took a fresh one first.
        assert "session expired" not in node.log()[log_size:]

    # A client that lets its session expire and sends anything else is disconnected.
    async def expire() -> None:
        from replog.errors import NetworkError
        from replog.kafka.messages.metadata_request import MetadataRequest
        from replog.wire.kafka_connection import KafkaConnection
        from replog.wire.sasl_authentication import SaslCredentials

        connection = await KafkaConnection.open(
            node.address("REAUTH"),
            client_id="test",
            setup_timeout_ms=10_000,
            sasl=SaslCredentials("PLAIN", "alice", "alice-plain"),
        )
        assert connection.renew_at_ms is not None
        await connection.call(MetadataRequest(topics=[]), timeout_ms=5000)
        await asyncio.sleep(REAUTH_MS / 1000 + 0.5)
        with pytest.raises(NetworkError):
            await connection.call(MetadataRequest(topics=[]), timeout_ms=5000)
        connection.close()

    asyncio.run(expire())
    assert "session expired" in node.log()


def test_credentials_survive_a_restart(node: SaslNode) -> None:
    node.stop()
    node.start()
    round_trip_confluent(node, "SASL_PLAINTEXT", "SCRAM-SHA-256", "after-restart")
    removed = node.replog(*ALTER_ALICE, "--delete-config", "SCRAM-SHA-256")
    assert removed.returncode == 0, removed.stderr
    wait_until(
        lambda: (
            "SCRAM-SHA-256"
            not in node.replog("configs", "describe", "--entity-type", "users").stdout
        ),
        "the credential removed",
        timeout_s=10,
    )
    with (
        AdminClient(node.config("SASL_PLAINTEXT", "SCRAM-SHA-256")) as refused,
        pytest.raises(confluent_kafka.KafkaException),
    ):
        refused.list_topics(timeout=5)
