"""The TLS of a node's internal links: its gRPC listener (replication, controller traffic,
transaction markers, Raft), the Raft Fetch and metadata append listeners, and every link it
dials to another node's. Kafka's names, checked once at start-up.

Rules:
- The internal listener is the first `listeners` entry (replog serves every gRPC service
  there). Its security protocol is its name's in `listener.security.protocol.map`; a map set
  explicitly must name it (Kafka refuses to start otherwise); with no map, its name (a name
  that is no protocol, such as CONTROLLER, is PLAINTEXT), as for every listener.
  PLAINTEXT: the internal links are plaintext. SSL: mutual TLS on all of them. SASL_PLAINTEXT
  and SASL_SSL are refused naming the key: the internal links authenticate by certificate.
- Its TLS settings are the listener's (`tls_config`: `listener.name.<internal>.ssl.*` over
  `ssl.*`), with both stores required; `ssl.client.auth` is `required` whatever the
  unprefixed key says (the Kafka listeners' setting), and the listener-prefixed key may only
  say so. An encrypted key's `ssl.key.password` is handed on (`link_security` decrypts it).
- Only the nodes are let in (`wire.link_peer_check`): a node is a certificate whose principal
  (`ssl.principal.mapping.rules`) is one of `super.users`, as Kafka's inter-broker principal
  is a super user; SSL with no `super.users` is refused naming the key, since no node could
  then reach another.
"""

from __future__ import annotations

from collections.abc import Mapping

from replog.errors import ConfigError
from replog.net_address import format_host_port
from replog.quorum.metadata.records import Endpoint
from replog.security.principal_mapping import RULES_KEY
from replog.server.config.authorizer_config import SUPER_USERS, AuthorizerConfig
from replog.server.config.tls_config import (
    CLIENT_AUTH,
    KEYSTORE_LOCATION,
    LISTENER_PREFIX,
    TRUSTSTORE_LOCATION,
    TlsConfig,
    listener_settings,
)
from replog.wire.link_security import LinkSettings

PROTOCOL_MAP = "listener.security.protocol.map"
SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})


def parse_protocol_map(text: str) -> dict[str, str]:
    """`listener.security.protocol.map` (`NAME:PROTOCOL,...`) as listener name -> protocol."""
    mapped: dict[str, str] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name, sep, protocol = (part.strip() for part in entry.partition(":"))
        if not sep or not name or protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"{PROTOCOL_MAP} entry {entry!r}: expected NAME:PROTOCOL with PROTOCOL one of "
                f"{', '.join(sorted(SECURITY_PROTOCOLS))}"
            )
        mapped[name] = protocol
    return mapped


def internal_link_settings(
    properties: Mapping[str, str], internal: Endpoint, authorizer: AuthorizerConfig
) -> LinkSettings | None:
    """The internal links' TLS (module rules); None: plaintext."""
    mapped = parse_protocol_map(properties.get(PROTOCOL_MAP, ""))
    address = format_host_port(internal.host, internal.port)
    where = f"the internal listener '{internal.name}://{address}'"
    if PROTOCOL_MAP in properties and internal.name not in mapped:
        raise ConfigError(
            f"{PROTOCOL_MAP}: no security protocol for {where}; a map set explicitly names "
            f"every listener (add {internal.name}:PLAINTEXT or {internal.name}:SSL)"
        )
    protocol = mapped.get(internal.name, internal.name)
    protocol = protocol if protocol in SECURITY_PROTOCOLS else "PLAINTEXT"
    if protocol == "PLAINTEXT":
        return None
    if protocol != "SSL":
        raise ConfigError(
            f"{PROTOCOL_MAP}: {where} is {protocol}; the internal links are PLAINTEXT or SSL "
            "(mutual TLS: nodes are recognised by their certificates)"
        )
    values, name = listener_settings(properties, internal.name)
    prefixed_auth = f"{LISTENER_PREFIX}{internal.name.lower()}.{CLIENT_AUTH}"
    auth = properties.get(prefixed_auth, "required").strip().lower()
    if auth != "required":
        raise ConfigError(
            f"{prefixed_auth}={auth}: the internal links are mutual TLS; leave it unset or "
            "set it to required"
        )
    tls = TlsConfig.from_properties({k: v for k, v in values.items() if k != CLIENT_AUTH})
    prefix = f"{LISTENER_PREFIX}{internal.name.lower()}."
    if tls is None:
        raise ConfigError(
            f"{where} is SSL: set {KEYSTORE_LOCATION} (or {prefix}{KEYSTORE_LOCATION}) to the "
            "PEM file of the node's key and certificate chain"
        )
    if tls.truststore_location is None:
        raise ConfigError(
            f"{where} is SSL: set {TRUSTSTORE_LOCATION} (or {prefix}{TRUSTSTORE_LOCATION}) to "
            "the PEM file of the certificates that sign the nodes'"
        )
    if not authorizer.super_users:
        raise ConfigError(
            f"{SUPER_USERS}: {where} is SSL and lets in only the nodes, the principals of "
            f"{SUPER_USERS} (their certificates' subjects by {RULES_KEY}); name the nodes' "
            "principals there"
        )
    return LinkSettings(
        keystore_location=tls.keystore_location,
        truststore_location=tls.truststore_location,
        node_principals=authorizer.super_users,
        principal_mapper=authorizer.principal_mapper,
        keystore_key=name(KEYSTORE_LOCATION),
        truststore_key=name(TRUSTSTORE_LOCATION),
        listener_name=internal.name,
        key_password=tls.key_password,
        key_password_key=name("ssl.key.password"),
    )
