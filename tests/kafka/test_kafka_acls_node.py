"""ACLs on a real node with the authorizer on (`authorizer.class.name`, Kafka's
StandardAuthorizer): confluent-kafka clients with mTLS certificates (principals mapped by
`ssl.principal.mapping.rules` to their CN), ACLs managed with `replog acls` over the PLAINTEXT
listener, whose ANONYMOUS principal is a super user. A principal without ACLs is refused, then
allowed once `replog acls --add` gives it the operation (a producer; a consumer in a group; a
transactional producer); deny beats allow; prefixed patterns; super users; a revoked ACL stops
an already connected producer's next request; the ACLs survive a restart of the node."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.confluent_producer import confluent_producer
from tests.eventually import wait_until
from tests.local_ports import free_base_port
from tests.node_process import start_node, stop_node
from tests.tls_certificates import Pki

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TOPIC_AUTHORIZATION_FAILED = confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED


@dataclass
class AclNode:
    directory: Path
    pki: Pki
    plain_port: int
    tls_port: int
    config: Path
    process: subprocess.Popen[bytes] | None = None
    started: list[float] = field(default_factory=list)

    @property
    def plain(self) -> str:
        return f"127.0.0.1:{self.plain_port}"

    def client(self, certificate: str, **more: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.tls_port}",
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.pki.truststore),
            "ssl.certificate.location": str(self.pki.directory / f"{certificate}.crt"),
            "ssl.key.location": str(self.pki.directory / f"{certificate}.key"),
            "socket.timeout.ms": 5000,
            **more,
        }

    def start(self) -> None:
        self.process = start_node(self.config, self.directory / "node.log")
        process = self.process

        def serving() -> bool:
            assert process.poll() is None, (self.directory / "node.log").read_text()[-3000:]
            with AdminClient({"bootstrap.servers": self.plain}) as admin:
                try:
                    brokers = admin.list_topics(timeout=2)
                except confluent_kafka.KafkaException:
                    return False
            return len(brokers.brokers) == 1

        wait_until(serving, "the node serving", timeout_s=60)

    def stop(self) -> None:
        if self.process is not None:
            stop_node(self.process)
            self.process = None


def acls(node: AclNode, *args: str) -> subprocess.CompletedProcess[str]:
    """`replog acls ... --bootstrap-server` the PLAINTEXT listener (ANONYMOUS: a super user)."""
    return subprocess.run(
        [sys.executable, "-m", "replog.cli.main", "acls", *args, "--bootstrap-server", node.plain],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclNode]:
    directory = tmp_path_factory.mktemp("acl-node")
    pki = Pki.create(directory / "pki")
    for name in ("alice", "bob", "root"):
        pki.keystore(name)
    base = free_base_port(1)
    grpc_port, plain_port, tls_port = base, base + 200, base + 300
    properties = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "cluster.id": "acl-node-test",
        "controller.quorum.voters": f"1@127.0.0.1:{grpc_port}",
        "listeners": (
            f"CONTROLLER://127.0.0.1:{grpc_port},PLAINTEXT://127.0.0.1:{plain_port},"
            f"SSL://127.0.0.1:{tls_port}"
        ),
        "log.dirs": str(directory / "data"),
        "ssl.keystore.location": str(pki.keystore("broker")),
        "ssl.truststore.location": str(pki.truststore),
        "ssl.client.auth": "required",
        # "CN=alice,O=replog tests" -> User:alice
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:ANONYMOUS;User:root",
        "offsets.topic.replication.factor": "1",
    }
    config = directory / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
    running = AclNode(directory, pki, plain_port, tls_port, config)
    try:
        running.start()
        with AdminClient({"bootstrap.servers": running.plain}) as admin:
            created = admin.create_topics(
                [
                    NewTopic(t, 1, 1)
                    for t in ("orders", "audit-log", "audit-secret", "revoked", "kept")
                ]
            )
            for future in created.values():
                future.result(timeout=30)
        yield running
    finally:
        running.stop()


def produce_error(config: dict[str, Any], topic: str) -> int | None:
    """Produce one record with a new producer: None when acknowledged, else the error code."""
    with confluent_producer({**config, "acks": "all", "message.timeout.ms": 8000}) as producer:
        return send(producer, topic)


def send(producer: confluent_kafka.Producer, topic: str) -> int | None:
    errors: list[confluent_kafka.KafkaError | None] = []
    producer.produce(topic, b"value", on_delivery=lambda error, _: errors.append(error))
    producer.flush(15)
    assert len(errors) == 1, "no delivery report within 15 s"
    error = errors[0]
    return None if error is None else error.code()


def test_a_principal_without_acls_is_refused_then_allowed_after_replog_acls_add(
    node: AclNode,
) -> None:
    alice = node.client("alice")
    assert produce_error(alice, "orders") == TOPIC_AUTHORIZATION_FAILED
    added = acls(
        node,
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Write",
        "--topic",
        "orders",
    )
    assert added.returncode == 0, added.stderr
    assert added.stdout == (
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, "
        "patternType=LITERAL)`: \n \t(principal=User:alice, host=*, operation=WRITE, "
        "permissionType=ALLOW) \n\n"
    )
    wait_until(
        lambda: produce_error(alice, "orders") is None, "alice allowed to write", timeout_s=20
    )
    listed = acls(node, "--list", "--topic", "orders")
    assert "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)" in listed.stdout
    # Write implies Describe, not Read: a consumer of alice's is refused the topic.
    consumer = confluent_kafka.Consumer(
        node.client("alice", **{"group.id": "alice-group", "auto.offset.reset": "earliest"})
    )
    try:
        consumer.subscribe(["orders"])
        message = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and message.error() is not None:
                break
        assert message is not None and message.error() is not None
        assert message.error().code() in (
            TOPIC_AUTHORIZATION_FAILED,
            confluent_kafka.KafkaError.GROUP_AUTHORIZATION_FAILED,
        )
    finally:
        consumer.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_consumer_reads_once_it_may_read_the_topic_and_its_group(
    node: AclNode, protocol: str
) -> None:
    """Both group protocols: JoinGroup/SyncGroup/OffsetCommit, and ConsumerGroupHeartbeat
    (KIP-848), each needing READ on the group (a prefixed ACL here) and on the topic."""
    for args in (("--topic", "orders"), ("--resource-pattern-type", "prefixed", "--group", "rd-")):
        added = acls(node, "--add", "--allow-principal", "User:alice", "--operation", "Read", *args)
        assert added.returncode == 0, added.stderr
    settings = {"group.id": f"rd-{protocol}", "auto.offset.reset": "earliest"}
    if protocol == "consumer":
        settings["group.protocol"] = "consumer"
    consumer = confluent_kafka.Consumer(node.client("alice", **settings))
    try:
        consumer.subscribe(["orders"])
        deadline = time.monotonic() + 30
        message = None
        while time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None:
                break
        assert message is not None and message.error() is None, message and message.error()
        assert message.value() == b"value"
        consumer.commit(message=message, asynchronous=False)  # OffsetCommit: READ on both
    finally:
        consumer.close()


def test_a_transactional_producer_needs_write_on_its_transactional_id(node: AclNode) -> None:
    config = {**node.client("alice"), "transactional.id": "alice-tx"}
    # Destroyed when the block ends, not when the test's frame is freed: `raised` holds that
    # frame in a reference cycle (through its traceback), which only the garbage collector
    # breaks.
    with (
        confluent_producer(config) as refused,
        pytest.raises(confluent_kafka.KafkaException) as raised,
    ):
        refused.init_transactions(15)
    assert raised.value.args[0].code() == (
        confluent_kafka.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    )
    added = acls(
        node,
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Write",
        "--operation",
        "Describe",
        "--transactional-id",
        "alice-tx",
    )
    assert added.returncode == 0, added.stderr
    with confluent_producer(config) as producer:
        producer.init_transactions(15)
        producer.begin_transaction()
        producer.produce("orders", b"in a transaction")
        producer.commit_transaction(15)


def test_deny_beats_allow_and_prefixed_patterns_match_their_prefix(node: AclNode) -> None:
    for args in (
        (
            "--allow-principal",
            "User:bob",
            "--resource-pattern-type",
            "prefixed",
            "--topic",
            "audit-",
        ),
        ("--deny-principal", "User:bob", "--topic", "audit-secret"),
    ):
        added = acls(node, "--add", "--operation", "Write", *args)
        assert added.returncode == 0, added.stderr
    bob = node.client("bob")
    wait_until(
        lambda: produce_error(bob, "audit-log") is None, "bob writing audit-log", timeout_s=20
    )
    assert produce_error(bob, "audit-secret") == TOPIC_AUTHORIZATION_FAILED
    assert produce_error(bob, "orders") == TOPIC_AUTHORIZATION_FAILED


def test_a_super_user_needs_no_acl(node: AclNode) -> None:
    assert produce_error(node.client("root"), "kept") is None


def test_a_revoked_acl_stops_a_connected_producers_next_request(node: AclNode) -> None:
    added = acls(
        node,
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Write",
        "--topic",
        "revoked",
    )
    assert added.returncode == 0, added.stderr
    with confluent_producer(
        {**node.client("alice"), "acks": "all", "message.timeout.ms": 8000}
    ) as producer:
        wait_until(lambda: send(producer, "revoked") is None, "alice writing revoked", timeout_s=20)
        removed = acls(
            node,
            "--remove",
            "--force",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Write",
            "--topic",
            "revoked",
        )
        assert removed.returncode == 0, removed.stderr
        wait_until(
            lambda: send(producer, "revoked") == TOPIC_AUTHORIZATION_FAILED,
            "the same producer refused",
            timeout_s=20,
        )


def test_an_unknown_operation_is_refused_naming_it(node: AclNode) -> None:
    refused = acls(
        node, "--add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "x"
    )
    assert refused.returncode == 1
    assert "--operation Fly: unknown operation" in refused.stderr
    wrong_type = acls(
        node,
        "--add",
        "--allow-principal",
        "User:a",
        "--operation",
        "Read",
        "--transactional-id",
        "t",
    )
    assert wrong_type.returncode == 1 and "only supports operations" in wrong_type.stderr


def test_acls_survive_a_restart(node: AclNode) -> None:
    # Last in this module: it restarts the node.
    added = acls(
        node, "--add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "kept"
    )
    assert added.returncode == 0, added.stderr
    before = acls(node, "--list").stdout
    node.stop()
    node.start()
    after = acls(node, "--list").stdout
    assert sorted(after.splitlines()) == sorted(before.splitlines())
    wait_until(
        lambda: produce_error(node.client("alice"), "kept") is None,
        "alice after restart",
        timeout_s=20,
    )
    assert produce_error(node.client("alice"), "revoked") == TOPIC_AUTHORIZATION_FAILED
