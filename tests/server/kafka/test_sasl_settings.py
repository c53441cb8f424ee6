"""The SASL settings of SASL_PLAINTEXT and SASL_SSL Kafka listeners (`sasl_config`), read from
Kafka's names per listener: every bad setting refused naming its key, no password in a repr."""

from __future__ import annotations

import pytest

from replog.errors import ConfigError
from replog.server.config.node_config import NodeConfig
from replog.server.config.sasl_config import SaslListenerConfig
from replog.server.process.known_properties import unknown_properties
from tests.server.kafka.test_tls_settings import node_properties

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_alice="alice-secret" user_bob="bob-secret";'
)


def sasl_node(**more: str) -> NodeConfig:
    return NodeConfig.from_properties(
        {
            **node_properties(
                "SASL_PLAINTEXT://127.0.0.1:34002,INTERNAL://127.0.0.1:34003",
                listener_security_protocol_map="INTERNAL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            ),
            **more,
        }
    )


def test_each_sasl_listener_gets_its_mechanisms_users_and_session_lifetime() -> None:
    config = sasl_node(
        **{
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "connections.max.reauth.ms": "60000",
            "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "5000",
        }
    )
    plain = config.sasl["SASL_PLAINTEXT"]
    assert plain == SaslListenerConfig(
        ("PLAIN", "SCRAM-SHA-512"),
        {"alice": "alice-secret", "bob": "bob-secret"},
        {"PLAIN": 5000, "SCRAM-SHA-512": 60000},
    )
    assert "secret" not in repr(plain) and "alice" in repr(plain)
    assert config.sasl["INTERNAL"] == SaslListenerConfig(
        ("SCRAM-SHA-256",), {}, {"SCRAM-SHA-256": 60000}
    )
    assert [e.security_protocol for e in config.kafka_listeners] == ["SASL_PLAINTEXT"] * 2
    assert "secret" not in repr(config.sasl)


@pytest.mark.parametrize(
    ("more", "expected"),
    [
        ({}, r"sasl.enabled.mechanisms: the SASL listener SASL_PLAINTEXT needs its mechanisms"),
        ({"sasl.enabled.mechanisms": "GSSAPI"}, r"GSSAPI not served"),
        ({"sasl.enabled.mechanisms": "PLAIN"}, r"plain.sasl.jaas.config: required for PLAIN"),
        (
            {
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": "x required;",
                "listener.name.internal.plain.sasl.jaas.config": JAAS,
            },
            r"the login module must be org.apache.kafka.common.security.plain.PlainLoginModule",
        ),
        (
            {"sasl.enabled.mechanisms": "SCRAM-SHA-256", "connections.max.reauth.ms": "-1"},
            r"connections.max.reauth.ms=-1: must be >= 0",
        ),
    ],
)
def test_bad_settings_are_refused_naming_the_key(more: dict[str, str], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        sasl_node(**more)


def test_a_sasl_ssl_listener_needs_a_keystore() -> None:
    with pytest.raises(ConfigError, match=r"is SASL_SSL: set ssl\.keystore\.location"):
        NodeConfig.from_properties(
            node_properties("SASL_SSL://127.0.0.1:34003", sasl_enabled_mechanisms="SCRAM-SHA-512")
        )


def test_listener_sasl_keys_are_known_settings() -> None:
    assert (
        unknown_properties(
            {
                "sasl.enabled.mechanisms": "PLAIN",
                "connections.max.reauth.ms": "0",
                "listener.name.a.plain.sasl.jaas.config": JAAS,
                "listener.name.a.sasl.enabled.mechanisms": "PLAIN",
                "listener.name.a.scram-sha-256.connections.max.reauth.ms": "1",
            }
        )
        == []
    )
    assert unknown_properties({"listener.name.a.plain.sasl.jass.config": "x"}) != []
