"""ACLs for a SASL principal on a real node: a SASL_SSL listener with the authorizer on, the
administrator `User:admin` (a super user, PLAIN) working through replog's commands with a
`--command-config` file, and `User:alice` signed in by SCRAM-SHA-256 with replog's own client.
alice is refused the topic, then allowed once `replog acls --add` gives her WRITE. Her client
also presents a certificate that `ssl.principal.mapping.rules` would map to `User:bob`: on
SASL_SSL the SASL login is the principal, as in Kafka, so bob's name never decides."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.eventually import wait_until
from tests.local_ports import free_ports_in
from tests.node_process import run_replog, start_node, stop_node
from tests.tls_certificates import Pki

PORTS = range(41500, 42000)  # this test's part of its range: never the defaults other runs use
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";'
ALICE_PASSWORD = "alice-scram"
TOPIC = "payments"


@dataclass
class SaslAclNode:
    directory: Path
    pki: Pki
    grpc_port: int
    sasl_port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    def client(self, user: str, mechanism: str, password: str, **more: Any) -> dict[str, Any]:
        """replog client settings for `user` on the SASL_SSL listener; with bob's certificate."""
        return {
            "bootstrap.servers": self.address,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(self.pki.truststore),
            "ssl.certificate.location": str(self.pki.directory / "bob.crt"),
            "ssl.key.location": str(self.pki.directory / "bob.key"),
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
            **more,
        }

    def replog(self, *args: str) -> subprocess.CompletedProcess[str]:
        """A `replog` command as the administrator (`--command-config admin.properties`)."""
        admin = self.directory / "admin.properties"
        return run_replog(*args, "--bootstrap-server", self.address, "--command-config", str(admin))

    def log(self) -> str:
        return (self.directory / "node.log").read_text(errors="replace")

    def start(self) -> None:
        self.process = start_node(self.directory / "server.properties", self.directory / "node.log")
        process = self.process

        def serving() -> bool:
            assert process.poll() is None, self.log()[-3000:]
            return self.replog("topics", "list").returncode == 0

        wait_until(serving, "the node serving the administrator", timeout_s=60)

    def stop(self) -> None:
        if self.process is not None:
            stop_node(self.process)
            self.process = None


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslAclNode]:
    directory = tmp_path_factory.mktemp("sasl-acl-node")
    pki = Pki.create(directory / "pki")
    pki.keystore("bob")
    grpc_port, sasl_port = free_ports_in(PORTS, 2)
    properties = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "cluster.id": "sasl-acl-node-test",
        "controller.quorum.voters": f"1@127.0.0.1:{grpc_port}",
        "listeners": f"CONTROLLER://127.0.0.1:{grpc_port},SASL_SSL://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "ssl.keystore.location": str(pki.keystore("broker")),
        "ssl.truststore.location": str(pki.truststore),
        "ssl.client.auth": "requested",
        # "CN=bob,O=replog tests" -> User:bob, were the certificate to name the principal
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
        "log.dirs": str(directory / "data"),
        "offsets.topic.replication.factor": "1",
    }
    (directory / "server.properties").write_text(
        "".join(f"{k}={v}\n" for k, v in properties.items())
    )
    running = SaslAclNode(directory, pki, grpc_port, sasl_port)
    admin = running.client("admin", "PLAIN", "admin-secret")
    del admin["bootstrap.servers"]  # the commands take --bootstrap-server
    (directory / "admin.properties").write_text("".join(f"{k}={v}\n" for k, v in admin.items()))
    try:
        running.start()
        created = running.replog(
            "configs",
            "alter",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
            "--add-config",
            f"SCRAM-SHA-256=[iterations=8192,password={ALICE_PASSWORD}]",
        )
        assert created.returncode == 0, created.stderr
        topic = running.replog("topics", "create", "--topic", TOPIC, "--partitions", "1")
        assert topic.returncode == 0, topic.stderr
        yield running
    finally:
        running.stop()


def alice_sends(node: SaslAclNode, value: bytes) -> int:
    """One record sent by alice (SCRAM, a new producer); its offset."""
    from replog import Producer

    settings = node.client("alice", "SCRAM-SHA-256", ALICE_PASSWORD, **{"max.block.ms": 10_000})
    with Producer(settings) as producer:
        return producer.send(TOPIC, value).get(timeout=15).offset


def test_alice_signed_in_by_scram_is_refused_then_allowed_after_replog_acls_add(
    node: SaslAclNode,
) -> None:
    from replog.errors import TopicAuthorizationFailedError

    with pytest.raises(TopicAuthorizationFailedError):
        alice_sends(node, b"refused")
    # The authorizer's refusal line names the SASL principal, never the certificate's.
    denied = [line for line in node.log().splitlines() if " is Denied operation = " in line]
    assert any("Principal = User:alice is Denied" in line for line in denied), node.log()[-3000:]
    assert not any("User:bob" in line for line in denied)
    added = node.replog(
        "acls", "--add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", TOPIC
    )
    assert added.returncode == 0, added.stderr
    assert "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)" in added.stdout
    offsets: list[int] = []

    def allowed() -> bool:
        try:
            offsets.append(alice_sends(node, b"allowed"))
        except TopicAuthorizationFailedError:
            return False
        return True

    wait_until(allowed, "alice allowed to write", timeout_s=20)
    assert offsets == [0]  # the refused send wrote nothing
