"""The files `replog cluster start --security sasl_ssl` writes before any node starts: each
node's SASL_SSL listener, SCRAM-SHA-512, the authorizer with the administrator and the nodes as
super users, and the administrator's bootstrap credential (no password); the password file and
both client files readable by their owner only, the password in clear there alone; a second
start of the stopped cluster keeping the password and naming its new ports; and the ssl
cluster's Java file with its PEM keystore. In-process: nothing starts."""

from __future__ import annotations

import os
from pathlib import Path

from test_cluster_start_ports import start_args

from replog.cli import cluster as cluster_cli
from replog.cli.cluster_tls_files import node_principal
from replog.config import parse_properties
from replog.security.principal import parse_super_users
from replog.server.config.node_config import NodeConfig
from tests.local_ports import KAFKA_PORT_OFFSET, free_base_port


def read(path: Path) -> dict[str, str]:
    return parse_properties(path.read_text(), source=str(path))


def private(path: Path) -> bool:
    return os.stat(path).st_mode & 0o077 == 0


def test_a_new_sasl_ssl_cluster_and_its_second_start(tmp_path: Path) -> None:
    base = free_base_port(3)
    directory = tmp_path / "secure"
    cluster = cluster_cli._cluster_to_start(
        start_args(directory, security="sasl_ssl", base_port=base)
    )
    password = (directory / "admin.password").read_text().strip()
    assert len(password) >= 32 and private(directory / "admin.password")
    for node in cluster.nodes:
        server = read(Path(node.config_path))
        assert server["listener.security.protocol.map"].count("SASL_SSL:SASL_SSL") == 1
        assert (
            f"SASL_SSL://127.0.0.1:{base + KAFKA_PORT_OFFSET + node.node_id - 1}"
            in (server["listeners"])
        )
        assert server["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
        assert server["allow.everyone.if.no.acl.found"] == "false"
        assert parse_super_users(server["super.users"]) == {
            "User:admin",
            *(node_principal(i) for i in (1, 2, 3)),
        }
        assert server["ssl.client.auth"] == "none"
        assert password not in Path(node.config_path).read_text()
        config = NodeConfig.from_properties(server)
        assert config.controller is not None
        (credential,) = config.controller.bootstrap_scram_credentials
        assert (credential.name, credential.mechanism) == ("admin", 2)
        assert config.authorizer.enabled
    client = read(directory / "client.properties")
    assert client["sasl.password"] == password and client["security.protocol"] == "SASL_SSL"
    assert client["bootstrap.servers"] == ",".join(
        f"127.0.0.1:{base + KAFKA_PORT_OFFSET + i}" for i in range(3)
    )
    java = read(directory / "client-java.properties")
    assert f'password="{password}";' in java["sasl.jaas.config"]
    assert "sasl.password" not in java and "ssl.ca.location" not in java
    assert private(directory / "client.properties")
    assert private(directory / "client-java.properties")

    moved = free_base_port(3)
    again = cluster_cli._cluster_to_start(
        start_args(directory, base_port=moved, kafka_base_port=moved + KAFKA_PORT_OFFSET)
    )
    assert again.security == "sasl_ssl"
    assert (directory / "admin.password").read_text().strip() == password
    assert read(directory / "client.properties")["bootstrap.servers"].startswith(
        f"127.0.0.1:{moved + KAFKA_PORT_OFFSET},"
    )


def test_an_ssl_clusters_java_file_names_a_pem_keystore(tmp_path: Path) -> None:
    directory = tmp_path / "ssl"
    cluster_cli._cluster_to_start(
        start_args(directory, security="ssl", base_port=free_base_port(3))
    )
    java = read(directory / "client-java.properties")
    keystore = directory / "tls" / "client-keystore.pem"
    assert java["security.protocol"] == "SSL"
    assert (java["ssl.keystore.type"], java["ssl.keystore.location"]) == ("PEM", str(keystore))
    assert java["ssl.truststore.location"] == str(directory / "tls" / "ca.pem")
    pem = keystore.read_text()
    assert pem.startswith("-----BEGIN PRIVATE KEY-----") and pem.count("BEGIN CERTIFICATE") == 2
    assert private(keystore)
    assert not (directory / "admin.password").exists()
