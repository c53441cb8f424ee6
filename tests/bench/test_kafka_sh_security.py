"""Apache Kafka's bench cluster secured as replog's (`KafkaSystem(security=...)`, kafka.sh's
`KAFKA_SECURITY`): the certificates and client files `kafka_security` writes, every node's
listeners and TLS files, under sasl_ssl the brokers' SCRAM credential formatted into the
metadata log, the authorizer and its super users; and kafka.sh's refusals, each naming what
is wrong. Under a stand-in `java` (`kafka_sh_stand_in`): no JVM starts, the configs are
written before the format that fails."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from kafka_sh_stand_in import KAFKA_SH, stand_in_environment

from replog.cli.bench.systems import KafkaSystem
from replog.config import parse_properties
from replog.errors import BenchSystemError
from tests.local_ports import free_port


def started_until_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, security: str
) -> tuple[KafkaSystem, int]:
    for name, value in stand_in_environment(tmp_path).items():
        monkeypatch.setenv(name, value)
    base_port = free_port()
    kafka = KafkaSystem(str(tmp_path / "cluster"), base_port, str(KAFKA_SH), security=security)
    with pytest.raises(BenchSystemError, match="formatting node 1 failed"):
        kafka.start()
    return kafka, base_port


def server_properties(tmp_path: Path, node: int) -> dict[str, str]:
    path = tmp_path / "cluster" / f"node-{node}" / "server.properties"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # the brokers' password under sasl_ssl
    return parse_properties(path.read_text(), source=str(path))


def test_ssl_puts_every_link_on_tls_with_each_nodes_certificate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kafka, base = started_until_format(tmp_path, monkeypatch, "ssl")

    tls = tmp_path / "cluster-security" / "tls"
    for node in (1, 2, 3):
        properties = server_properties(tmp_path, node)
        broker, controller = base + node - 1, base + 100 + node - 1
        assert properties["listeners"] == (
            f"SSL://127.0.0.1:{broker},CONTROLLER://127.0.0.1:{controller}"
        )
        assert properties["advertised.listeners"] == f"SSL://127.0.0.1:{broker}"
        assert properties["inter.broker.listener.name"] == "SSL"
        assert properties["listener.security.protocol.map"] == "CONTROLLER:SSL,SSL:SSL"
        assert properties["ssl.keystore.type"] == properties["ssl.truststore.type"] == "PEM"
        assert properties["ssl.keystore.location"] == str(tls / f"node-{node}.pem")
        assert properties["ssl.truststore.location"] == str(tls / "ca.pem")
        assert properties["ssl.client.auth"] == "required"
        assert "sasl.enabled.mechanisms" not in properties
        assert "authorizer.class.name" not in properties
        keystore = (tls / f"node-{node}.pem").read_text()
        assert keystore.startswith("-----BEGIN PRIVATE KEY-----")  # PKCS#8, as Kafka reads it
        assert keystore.count("-----BEGIN CERTIFICATE-----") == 2  # the node's, the CA's
    assert "--add-scram" not in Path(os.environ["FORMAT_ARGS"]).read_text().splitlines()

    # The clients' files name Kafka's brokers and the certificates made for them.
    brokers = ",".join(f"127.0.0.1:{base + i}" for i in range(3))
    assert kafka.secured is not None
    client = kafka.secured.client_properties()
    assert client["bootstrap.servers"] == brokers
    assert client["security.protocol"] == "SSL"
    assert client["ssl.ca.location"] == str(tls / "ca.pem")
    assert client["ssl.certificate.location"] == str(tls / "client.crt")
    java_path = Path(kafka.secured.java_client_config_path)
    java = parse_properties(java_path.read_text(), source=str(java_path))
    assert java["bootstrap.servers"] == brokers
    assert java["ssl.keystore.location"] == str(tls / "client-keystore.pem")
    assert kafka.client_config()["ssl.key.location"] == str(tls / "client.key")


def test_sasl_ssl_formats_the_brokers_credential_and_runs_replogs_authorizer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kafka, base = started_until_format(tmp_path, monkeypatch, "sasl_ssl")

    password = (tmp_path / "cluster-security" / "admin.password").read_text().strip()
    format_args = Path(os.environ["FORMAT_ARGS"]).read_text().splitlines()
    scram = format_args.index("--add-scram")
    assert format_args[scram + 1] == f"SCRAM-SHA-512=[name=admin,password={password}]"
    tls = tmp_path / "cluster-security" / "tls"
    properties = server_properties(tmp_path, 2)
    assert properties["listeners"] == (
        f"SASL_SSL://127.0.0.1:{base + 1},CONTROLLER://127.0.0.1:{base + 101}"
    )
    assert properties["inter.broker.listener.name"] == "SASL_SSL"
    assert properties["listener.security.protocol.map"] == "CONTROLLER:SSL,SASL_SSL:SASL_SSL"
    assert properties["ssl.keystore.location"] == str(tls / "node-2.pem")
    assert properties["ssl.client.auth"] == "none"
    assert properties["listener.name.controller.ssl.client.auth"] == "required"
    assert properties["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert properties["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    assert properties["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="admin" password="{password}";'
    )
    assert properties["authorizer.class.name"] == (
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    )
    assert properties["allow.everyone.if.no.acl.found"] == "false"
    assert properties["super.users"] == ";".join(
        ["User:admin", *(f"User:CN=replog-node-{i},O=replog local cluster" for i in (1, 2, 3))]
    )

    client = kafka.client_config()
    assert client["security.protocol"] == "SASL_SSL"
    assert client["sasl.mechanism"] == "SCRAM-SHA-512"
    assert (client["sasl.username"], client["sasl.password"]) == ("admin", password)


def kafka_sh_start(directory: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    directory.mkdir()
    env = {**os.environ, **stand_in_environment(directory), **settings}
    return subprocess.run(
        ["bash", str(KAFKA_SH), "start"], env=env, capture_output=True, text=True, timeout=60
    )


def test_kafka_sh_refuses_a_security_it_cannot_set_up_naming_what_is_wrong(
    tmp_path: Path,
) -> None:
    tls = tmp_path / "tls"
    tls.mkdir()
    for name in ("ca.pem", "node-1.pem", "node-3.pem"):
        (tls / name).write_text("pem")
    password = tmp_path / "password"
    password.write_text('pass"word\n')
    refusals = {
        "KAFKA_SECURITY=tls: plaintext, ssl or sasl_ssl": {"KAFKA_SECURITY": "tls"},
        "KAFKA_SECURITY=ssl needs KAFKA_TLS_DIR": {"KAFKA_SECURITY": "ssl"},
        f"{tls}/node-2.pem is not readable": {"KAFKA_SECURITY": "ssl", "KAFKA_TLS_DIR": str(tls)},
    }
    for number, (expected, settings) in enumerate(refusals.items()):
        done = kafka_sh_start(tmp_path / f"refused-{number}", **settings)
        assert done.returncode != 0
        assert expected in done.stderr, done.stderr
        assert not (tmp_path / f"refused-{number}" / "kafka" / "cluster").exists()
    (tls / "node-2.pem").write_text("pem")
    sasl = {"KAFKA_SECURITY": "sasl_ssl", "KAFKA_TLS_DIR": str(tls)}
    done = kafka_sh_start(tmp_path / "no-password", **sasl)
    assert "KAFKA_SECURITY=sasl_ssl needs KAFKA_SASL_PASSWORD_FILE" in done.stderr, done.stderr
    done = kafka_sh_start(
        tmp_path / "quoted-password", **sasl, KAFKA_SASL_PASSWORD_FILE=str(password)
    )
    assert f"{password} holds no password of [A-Za-z0-9._~-] only" in done.stderr, done.stderr
    # Refused before anything is written: no cluster directory, no format.
    for run in ("no-password", "quoted-password"):
        assert not (tmp_path / run / "kafka" / "cluster").exists()
        assert not (tmp_path / run / "format-args").exists()
    # The files in place, the same start goes on to the format (the stand-in's refusal).
    password.write_text("url-safe_password\n")
    done = kafka_sh_start(tmp_path / "accepted", **sasl, KAFKA_SASL_PASSWORD_FILE=str(password))
    assert "formatting node 1 failed" in done.stderr, done.stderr
