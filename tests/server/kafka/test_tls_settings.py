"""The TLS settings of SSL Kafka listeners (`tls_config`, `tls_context`) and which `listeners`
entries a node serves with TLS: every bad setting refused naming its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from replog.errors import ConfigError
from replog.server.config.node_config import NodeConfig
from replog.server.config.tls_config import TlsConfig
from replog.server.kafka.tls_context import server_ssl_context
from tests.tls_certificates import Pki


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki.create(tmp_path / "pki")


def node_properties(listeners: str, **more: str) -> dict[str, str]:
    return {
        "process.roles": "broker,controller",
        "node.id": "1",
        "cluster.id": "tls-test",
        "controller.quorum.voters": "1@127.0.0.1:34001",
        "listeners": f"CONTROLLER://127.0.0.1:34001,{listeners}",
        "log.dirs": "/tmp/unused-tls-test",
        **{key.replace("_", "."): value for key, value in more.items()},
    }


@pytest.mark.parametrize(
    ("properties", "expected"),
    [
        ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type=JKS: replog reads PEM files only"),
        ({"ssl.truststore.type": "PKCS12"}, "ssl.truststore.type=PKCS12"),
        ({"ssl.keystore.key": "-----BEGIN"}, "ssl.keystore.key: inline PEM is not read"),
        ({"ssl.client.auth": "maybe"}, "ssl.client.auth=maybe: expected one of none, requested"),
        (
            {"ssl.keystore.location": "k.pem", "ssl.client.auth": "required"},
            "set ssl.truststore.location",
        ),
    ],
)
def test_bad_settings_are_refused_naming_the_key(properties: dict[str, str], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        TlsConfig.from_properties(properties)


def test_settings_read_and_the_password_kept_out_of_the_repr() -> None:
    config = TlsConfig.from_properties(
        {
            "ssl.keystore.type": "pem",
            "ssl.keystore.location": "k.pem",
            "ssl.key.password": "hunter2",
            "ssl.truststore.location": "ca.pem",
            "ssl.client.auth": "Requested",
        }
    )
    assert config == TlsConfig("k.pem", "hunter2", "ca.pem", "requested")
    assert "hunter2" not in repr(config)
    assert TlsConfig.from_properties({}) is None


def test_an_encrypted_key_loads_with_its_password_only(pki: Pki) -> None:
    keystore = pki.keystore("broker", password=b"hunter2")
    context = server_ssl_context(
        TlsConfig(str(keystore), "hunter2", str(pki.truststore), "required")
    )
    assert context.verify_mode.name == "CERT_REQUIRED"
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location=.*broker\.pem: cannot load"):
        server_ssl_context(TlsConfig(str(keystore), "wrong"))


def test_missing_or_mismatched_files_are_named(pki: Pki, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location=.*absent\.pem"):
        server_ssl_context(TlsConfig(str(tmp_path / "absent.pem")))
    pki.keystore("a")
    pki.keystore("b")
    mismatched = tmp_path / "mismatched.pem"
    mismatched.write_bytes(
        (pki.directory / "a.key").read_bytes() + (pki.directory / "b.crt").read_bytes()
    )
    with pytest.raises(ConfigError, match=r"mismatched\.pem: cannot load"):
        server_ssl_context(TlsConfig(str(mismatched)))
    keystore = pki.keystore("c")
    with pytest.raises(ConfigError, match=r"ssl\.truststore\.location=.*nothing\.pem"):
        server_ssl_context(TlsConfig(str(keystore), None, str(tmp_path / "nothing.pem")))


def test_ssl_and_sasl_ssl_listeners_are_served_with_tls() -> None:
    config = NodeConfig.from_properties(
        node_properties(
            "PLAINTEXT://127.0.0.1:34002,SSL://127.0.0.1:34003,CLIENT://127.0.0.1:34004,"
            "SASL_SSL://127.0.0.1:34005",
            listener_security_protocol_map="CLIENT:SSL,CONTROLLER:PLAINTEXT",
            ssl_keystore_location="k.pem",
            sasl_enabled_mechanisms="SCRAM-SHA-512",
        )
    )
    served = {e.name: e.security_protocol for e in config.kafka_listeners}
    assert served == {
        "PLAINTEXT": "PLAINTEXT",
        "SSL": "SSL",
        "CLIENT": "SSL",
        "SASL_SSL": "SASL_SSL",
    }
    assert config.tls == TlsConfig("k.pem")


def test_an_ssl_listener_without_a_keystore_fails_the_node() -> None:
    with pytest.raises(ConfigError, match=r"'SSL://127\.0\.0\.1:34003' is SSL: set ssl\.keystore"):
        NodeConfig.from_properties(node_properties("SSL://127.0.0.1:34003"))
