"""The TLS settings of a node's SSL listeners, by Kafka's names, checked once at start-up.

Rules:
- A listener's settings are the `ssl.*` keys, each overridden by its
  `listener.name.<listener>.ssl.*` form where set (the listener name lower-cased, key by key,
  as Kafka's `valuesWithPrefixOverride`); messages name the key that was read.
- PEM files only: `ssl.keystore.location` names a PEM file holding the private key and the
  certificate chain (`ssl.key.password` decrypts an encrypted key), `ssl.truststore.location`
  a PEM file of the certificates trusted to sign clients'. `ssl.keystore.type` and
  `ssl.truststore.type` may be unset or PEM; JKS and PKCS12 stores are refused naming the key.
  The inline PEM forms (`ssl.keystore.certificate.chain`, `ssl.keystore.key`,
  `ssl.truststore.certificates`) are refused naming the file setting to use instead.
- `ssl.client.auth`: none (the default: no client certificate asked), requested (asked, and
  checked against the truststore when sent), required (a connection without one that the
  truststore accepts fails its handshake); requested and required need a truststore.
- No keystore is no TLS configuration: an SSL listener then fails the node's start naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from replog.errors import ConfigError

KEYSTORE_LOCATION = "ssl.keystore.location"
TRUSTSTORE_LOCATION = "ssl.truststore.location"
CLIENT_AUTH = "ssl.client.auth"
CLIENT_AUTH_VALUES = ("none", "requested", "required")
STORE_TYPES = {"ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM"}
INLINE_PEM = {
    "ssl.keystore.certificate.chain": KEYSTORE_LOCATION,
    "ssl.keystore.key": KEYSTORE_LOCATION,
    "ssl.truststore.certificates": TRUSTSTORE_LOCATION,
}
TLS_PROPERTIES = frozenset(
    {KEYSTORE_LOCATION, TRUSTSTORE_LOCATION, CLIENT_AUTH, "ssl.key.password"}
    | STORE_TYPES.keys()
    | INLINE_PEM.keys()
)
LISTENER_PREFIX = "listener.name."


def is_listener_tls_key(key: str) -> bool:
    """A `listener.name.<listener>.ssl.*` key read here (the settings check knows it)."""
    if not key.startswith(LISTENER_PREFIX):
        return False
    return key[len(LISTENER_PREFIX) :].partition(".")[2] in TLS_PROPERTIES


def listener_settings(
    properties: Mapping[str, str], listener: str | None
) -> tuple[dict[str, str], Callable[[str], str]]:
    """The `ssl.*` settings of `listener` (None: the unprefixed ones), and the key each was
    read from (module rules)."""
    prefix = "" if listener is None else f"{LISTENER_PREFIX}{listener.lower()}."
    found: dict[str, str] = {}
    read_from: dict[str, str] = {}
    for key in TLS_PROPERTIES:
        for candidate in (prefix + key, key) if prefix else (key,):
            if candidate in properties:
                found[key] = properties[candidate]
                read_from[key] = candidate
                break
    return found, lambda key: read_from.get(key, prefix + key if prefix else key)


@dataclass(frozen=True, slots=True)
class TlsConfig:
    keystore_location: str
    key_password: str | None = None
    truststore_location: str | None = None
    client_auth: str = "none"

    def __repr__(self) -> str:
        return (
            f"TlsConfig(keystore_location={self.keystore_location!r}, "
            f"truststore_location={self.truststore_location!r}, "
            f"client_auth={self.client_auth!r})"
        )

    @classmethod
    def from_properties(
        cls, all_properties: Mapping[str, str], listener: str | None = None
    ) -> TlsConfig | None:
        """The settings of `listener` in `all_properties` (None: the unprefixed ones); None
        when no keystore is named."""
        properties, name = listener_settings(all_properties, listener)
        for key, expected in STORE_TYPES.items():
            value = properties.get(key, expected).strip()
            if value.upper() != expected:
                raise ConfigError(
                    f"{name(key)}={value}: replog reads PEM files only; convert the store to "
                    f"PEM ({name(key)}=PEM)"
                )
        for key, instead in INLINE_PEM.items():
            if properties.get(key, "").strip():
                raise ConfigError(
                    f"{name(key)}: inline PEM is not read; put the PEM in a file named by "
                    f"{name(instead)}"
                )
        client_auth = properties.get(CLIENT_AUTH, "none").strip().lower()
        if client_auth not in CLIENT_AUTH_VALUES:
            raise ConfigError(
                f"{name(CLIENT_AUTH)}={client_auth}: expected one of "
                f"{', '.join(CLIENT_AUTH_VALUES)}"
            )
        keystore = properties.get(KEYSTORE_LOCATION, "").strip()
        truststore = properties.get(TRUSTSTORE_LOCATION, "").strip() or None
        if not keystore:
            return None
        if client_auth != "none" and truststore is None:
            raise ConfigError(
                f"{name(CLIENT_AUTH)}={client_auth} checks client certificates: set "
                f"{name(TRUSTSTORE_LOCATION)} to the PEM file of the certificates that sign them"
            )
        return cls(keystore, properties.get("ssl.key.password") or None, truststore, client_auth)
