"""`replog cluster start --security sasl_ssl`: a one-node cluster whose broker serves Kafka's
protocol only over TLS with SCRAM-SHA-512, the authorizer on with
`allow.everyone.if.no.acl.found=false`, and an administrator made by the start. The
client.properties it writes is used as it is by `replog` commands (`--command-config`),
confluent-kafka and `kcat -F`; the password is in no output and in no file but the owner-only
password file and the two client files; a second SCRAM user without ACLs is refused, then
allowed once `replog acls --add` grants it; the controllers' Kafka listener signs the
administrator in too (`--bootstrap-controller`); a second start keeps the administrator."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import LoopbackCluster, replog, wait_for
from confluent_kafka.admin import AdminClient
from secured_cluster import (
    cli,
    confluent_kafka_and_kcat_round_trip,
    secured_cluster,
    settings,
    status_names_its_files,
)

from replog import Producer
from replog.config import parse_properties
from replog.errors import SaslAuthenticationFailedError, TopicAuthorizationFailedError
from tests.local_ports import KAFKA_PORT_OFFSET

BOB_PASSWORD = "bob-scram-512"
STARTED: dict[str, str] = {}  # the start's output, for the password check


@pytest.fixture(scope="module")
def sasl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackCluster]:
    with secured_cluster(tmp_path_factory.mktemp("sasl-ssl"), "sasl_ssl") as (cluster, said):
        STARTED["out"] = said
        yield cluster


def bob_file(cluster: LoopbackCluster, tmp_path: Path, password: str = BOB_PASSWORD) -> Path:
    """bob's client.properties: the cluster's, with bob's name and password."""
    bob = {**settings(cluster), "sasl.username": "bob", "sasl.password": password}
    path = tmp_path / "bob.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in bob.items()))
    return path


def test_status_and_the_files_it_names(sasl_cluster: LoopbackCluster) -> None:
    java = status_names_its_files(sasl_cluster, "sasl_ssl")
    kafka = f"127.0.0.1:{sasl_cluster.base_port + KAFKA_PORT_OFFSET}"
    written = settings(sasl_cluster)
    password = (sasl_cluster.data_dir / "admin.password").read_text().strip()
    assert written == {
        "bootstrap.servers": kafka,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "admin",
        "sasl.password": password,
        "ssl.ca.location": str(sasl_cluster.data_dir / "tls" / "ca.pem"),
    }
    assert len(password) >= 32
    java_settings = parse_properties(java.read_text(), source=str(java))
    assert java_settings["sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="admin" password="{password}";'
    )
    assert java_settings["ssl.truststore.type"] == "PEM"
    for secret in ("admin.password", "client.properties", "client-java.properties"):
        assert os.stat(sasl_cluster.data_dir / secret).st_mode & 0o077 == 0, secret
    server = (sasl_cluster.data_dir / "node-1" / "server.properties").read_text()
    assert "SASL_SSL://127.0.0.1:" in server and "allow.everyone.if.no.acl.found=false" in server
    assert "bootstrap.scram.credentials=SCRAM-SHA-512=[name=admin," in server
    status_text = sasl_cluster.ask("status").stdout
    for shown in (STARTED["out"], status_text, server):
        assert password not in shown


def test_replog_commands_confluent_kafka_and_kcat_as_admin(sasl_cluster: LoopbackCluster) -> None:
    created = cli(
        sasl_cluster, "topics", "create", "--topic", "orders", "--partitions", "1",
        "--replication-factor", "1",
    )  # fmt: skip
    assert "Created topic orders." in created
    cli(sasl_cluster, "produce", "--topic", "orders", "--key-separator", ":", stdin="k1:a\n")
    consumed = cli(
        sasl_cluster, "consume", "--topic", "orders", "--from-beginning", "--print-key",
        "--max-messages", "1", "--group", "cli-readers",
    )  # fmt: skip
    assert consumed.splitlines() == ["k1\ta"], consumed
    # Without the file the local cluster's client.properties is named at once.
    plain = replog("topics", "list", "--data-dir", str(sasl_cluster.data_dir))
    assert plain.returncode == 1 and "--command-config" in plain.stderr, plain.stderr
    confluent_kafka_and_kcat_round_trip(sasl_cluster)


def test_a_user_without_acls_is_refused_then_allowed_after_replog_acls_add(
    sasl_cluster: LoopbackCluster, tmp_path: Path
) -> None:
    cli(
        sasl_cluster, "configs", "alter", "--entity-type", "users", "--entity-name", "bob",
        "--add-config", f"SCRAM-SHA-512=[iterations=8192,password={BOB_PASSWORD}]",
    )  # fmt: skip
    cli(sasl_cluster, "topics", "create", "--topic", "bobs", "--partitions", "1")
    bob = parse_properties(bob_file(sasl_cluster, tmp_path).read_text(), source="bob")
    wrong = parse_properties(bob_file(sasl_cluster, tmp_path, "wrong").read_text(), source="w")

    def bob_sends(config: dict[str, str]) -> int:
        with Producer({**config, "max.block.ms": 10_000}) as producer:
            return producer.send("bobs", b"hello").get(timeout=15).offset

    with pytest.raises(SaslAuthenticationFailedError):
        bob_sends(wrong)
    with pytest.raises(TopicAuthorizationFailedError):
        bob_sends(bob)
    listed = replog("topics", "list", "--command-config", str(bob_file(sasl_cluster, tmp_path)))
    assert listed.returncode == 0 and "bobs" not in listed.stdout.split(), listed
    cli(
        sasl_cluster, "acls", "--add", "--allow-principal", "User:bob", "--operation", "Write",
        "--topic", "bobs",
    )  # fmt: skip
    offsets: list[int] = []

    def allowed() -> bool:
        try:
            offsets.append(bob_sends(bob))
        except TopicAuthorizationFailedError:
            return False
        return True

    wait_for(allowed, 20, "bob allowed to write")
    assert offsets == [0]  # the refused send wrote nothing


def test_confluent_kafka_reads_the_authorized_operations(
    sasl_cluster: LoopbackCluster, tmp_path: Path
) -> None:
    """librdkafka's DescribeTopics (Metadata with include_topic_authorized_operations) and
    DescribeCluster: the administrator, a super user, may do every supported operation; bob,
    granted WRITE on his topic only, WRITE and the DESCRIBE it implies, nothing on the cluster."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation as Op

    cli(sasl_cluster, "topics", "create", "--topic", "ops", "--partitions", "1")
    cli(
        sasl_cluster, "acls", "--add", "--allow-principal", "User:carl", "--operation", "Write",
        "--topic", "ops",
    )  # fmt: skip
    cli(
        sasl_cluster, "configs", "alter", "--entity-type", "users", "--entity-name", "carl",
        "--add-config", f"SCRAM-SHA-512=[iterations=8192,password={BOB_PASSWORD}]",
    )  # fmt: skip
    asked = TopicCollection(["ops"])
    with AdminClient(settings(sasl_cluster)) as admin:
        everything = admin.describe_topics(asked, include_authorized_operations=True)["ops"]
        assert set(everything.result(30).authorized_operations) == {
            Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.DESCRIBE_CONFIGS,
            Op.ALTER_CONFIGS,
        }  # fmt: skip
        cluster = admin.describe_cluster(include_authorized_operations=True).result(30)
        assert Op.ALTER in cluster.authorized_operations
    with AdminClient(
        {**settings(sasl_cluster), "sasl.username": "carl"} | {"sasl.password": BOB_PASSWORD}
    ) as carl:
        described = carl.describe_topics(asked, include_authorized_operations=True)["ops"]
        assert set(described.result(30).authorized_operations) == {Op.WRITE, Op.DESCRIBE}
        assert (
            not carl.describe_cluster(include_authorized_operations=True)
            .result(30)
            .authorized_operations
        )


def test_bootstrap_controller_tools_sign_in_at_the_controllers_listener(
    sasl_cluster: LoopbackCluster, tmp_path: Path
) -> None:
    """The controller's Kafka listener is SASL_SSL as the broker's is: `replog quorum describe
    --bootstrap-controller` signs in there as the administrator with the same file; a wrong
    password is refused, and so is a client without the file."""
    controller = f"127.0.0.1:{sasl_cluster.base_port + KAFKA_PORT_OFFSET + 100}"
    described = cli(sasl_cluster, "quorum", "describe", "--bootstrap-controller", controller)
    assert "LeaderId:" in described and "CurrentVoters:" in described, described
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(
        "".join(f"{k}={v}\n" for k, v in settings(sasl_cluster, **{"sasl.password": "x"}).items())
    )
    refused = replog(
        "quorum", "describe", "--bootstrap-controller", controller, "--command-config", str(wrong)
    )
    assert refused.returncode != 0 and "invalid credentials" in refused.stderr, refused.stderr
    bare = replog("quorum", "describe", "--bootstrap-controller", controller, "--timeout", "3")
    assert bare.returncode != 0 and "LeaderId" not in bare.stdout, bare


def test_a_second_start_keeps_the_administrator(sasl_cluster: LoopbackCluster) -> None:
    # Last in this module: it stops the cluster the others use.
    password = (sasl_cluster.data_dir / "admin.password").read_text()
    sasl_cluster.cli("stop")
    sasl_cluster.start(planned=False)
    assert (sasl_cluster.data_dir / "admin.password").read_text() == password
    assert "orders" in cli(sasl_cluster, "topics", "list").split()
