"""The settings of TLS inside the cluster (`internal_tls_config`) and per listener
(`tls_config`'s `listener.name.<listener>.ssl.*`): what a node reads, and every bad setting
refused naming its key."""

from __future__ import annotations

import pytest

from replog.errors import ConfigError
from replog.server.config.node_config import NodeConfig
from replog.server.config.tls_config import TlsConfig
from replog.server.process.known_properties import unknown_properties

NODES = "User:CN=node-1,O=replog tests;User:CN=node-2,O=replog tests"


def node_properties(**more: str) -> dict[str, str]:
    return {
        "process.roles": "broker,controller",
        "node.id": "1",
        "cluster.id": "internal-tls-test",
        "controller.quorum.voters": "1@127.0.0.1:34101",
        "listeners": "CONTROLLER://127.0.0.1:34101,SSL://127.0.0.1:34102,"
        "CONTROLLER_KAFKA://127.0.0.1:34103",
        "controller.listener.names": "CONTROLLER,CONTROLLER_KAFKA",
        "log.dirs": "/tmp/unused-internal-tls-test",
        "ssl.keystore.location": "node.pem",
        "ssl.truststore.location": "ca.pem",
        "ssl.client.auth": "none",
        **more,
    }


def secured(**more: str) -> dict[str, str]:
    """Every listener SSL, the nodes named in super.users."""
    return node_properties(
        **{
            "listener.security.protocol.map": "CONTROLLER:SSL,SSL:SSL,CONTROLLER_KAFKA:SSL",
            "super.users": NODES,
            **more,
        }
    )


def test_the_internal_links_are_plaintext_unless_the_internal_listener_is_ssl() -> None:
    config = NodeConfig.from_properties(node_properties())
    assert config.internal_links is None
    served = {e.name: e.security_protocol for e in config.kafka_listeners}
    assert served == {"SSL": "SSL"}
    assert config.kafka_controller_listener is not None
    assert config.kafka_controller_listener.security_protocol == "PLAINTEXT"


def test_an_ssl_internal_listener_is_mutual_tls_open_to_the_super_users() -> None:
    config = NodeConfig.from_properties(secured())
    links = config.internal_links
    assert links is not None
    assert (links.keystore_location, links.truststore_location) == ("node.pem", "ca.pem")
    assert links.node_principals == {
        "User:CN=node-1,O=replog tests",
        "User:CN=node-2,O=replog tests",
    }
    # The controller's Kafka listener is SSL too, with the unprefixed settings.
    assert config.kafka_controller_listener is not None
    assert config.kafka_controller_listener.security_protocol == "SSL"
    assert config.listener_tls["CONTROLLER_KAFKA"] == TlsConfig("node.pem", None, "ca.pem", "none")


def test_listener_prefixed_settings_override_the_unprefixed_ones_key_by_key() -> None:
    config = NodeConfig.from_properties(
        secured(
            **{
                "listener.name.controller.ssl.keystore.location": "internal.pem",
                "listener.name.ssl.ssl.client.auth": "required",
                "listener.name.controller_kafka.ssl.truststore.location": "tools-ca.pem",
            }
        )
    )
    assert config.internal_links is not None
    assert config.internal_links.keystore_location == "internal.pem"
    assert config.internal_links.keystore_key == "listener.name.controller.ssl.keystore.location"
    assert config.internal_links.truststore_location == "ca.pem"
    assert config.listener_tls["SSL"] == TlsConfig("node.pem", None, "ca.pem", "required")
    assert config.listener_tls["CONTROLLER_KAFKA"].truststore_location == "tools-ca.pem"
    known = secured(**{"listener.name.controller.ssl.keystore.location": "internal.pem"})
    assert unknown_properties(known) == []


@pytest.mark.parametrize(
    ("more", "expected"),
    [
        (
            {"listener.security.protocol.map": "CONTROLLER:SASL_SSL,SSL:SSL"},
            r"internal listener 'CONTROLLER://127\.0\.0\.1:34101' is SASL_SSL; the internal "
            "links are PLAINTEXT or SSL",
        ),
        (
            {"ssl.truststore.location": None},
            r"set ssl\.truststore\.location \(or listener\.name\.controller\.ssl\.truststore"
            r"\.location\) to the PEM file of the certificates that sign the nodes'",
        ),
        ({"super.users": ""}, r"super\.users: the internal listener .* lets in only the nodes"),
        (
            {"listener.security.protocol.map": "SSL:SSL,CONTROLLER_KAFKA:SSL"},
            r"listener\.security\.protocol\.map: no security protocol for the internal "
            r"listener 'CONTROLLER://127\.0\.0\.1:34101'",
        ),
        (
            {"listener.name.controller.ssl.client.auth": "requested"},
            r"listener\.name\.controller\.ssl\.client\.auth=requested: the internal links are "
            "mutual TLS",
        ),
        (
            {"listener.name.controller.ssl.keystore.type": "JKS"},
            r"ssl\.keystore\.type=JKS: replog reads PEM files only",
        ),
    ],
)
def test_bad_internal_settings_are_refused_naming_the_key(
    more: dict[str, str | None], expected: str
) -> None:
    """`more`'s None values remove their keys."""
    properties = secured(**{k: v for k, v in more.items() if v is not None})
    for key in (k for k, v in more.items() if v is None):
        del properties[key]
    with pytest.raises(ConfigError, match=expected):
        NodeConfig.from_properties(properties)


def test_an_ssl_internal_listener_without_a_keystore_names_both_keys() -> None:
    properties = secured(listeners="CONTROLLER://127.0.0.1:34101")
    del properties["ssl.keystore.location"]
    properties["controller.listener.names"] = "CONTROLLER"
    expected = r"internal listener .* is SSL: set ssl\.keystore\.location \(or listener\.name\."
    with pytest.raises(ConfigError, match=expected):
        NodeConfig.from_properties(properties)
