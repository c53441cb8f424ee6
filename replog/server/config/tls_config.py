"""The TLS settings of a node's SSL Kafka listeners, by Kafka's names, checked once at start-up.

Rules:
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

from collections.abc import Mapping
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
    def from_properties(cls, properties: Mapping[str, str]) -> TlsConfig | None:
        """The settings of `properties`; None when no keystore is named."""
        for key, expected in STORE_TYPES.items():
            value = properties.get(key, expected).strip()
            if value.upper() != expected:
                raise ConfigError(
                    f"{key}={value}: replog reads PEM files only; convert the store to PEM "
                    f"({key}=PEM)"
                )
        for key, instead in INLINE_PEM.items():
            if properties.get(key, "").strip():
                raise ConfigError(
                    f"{key}: inline PEM is not read; put the PEM in a file named by {instead}"
                )
        client_auth = properties.get(CLIENT_AUTH, "none").strip().lower()
        if client_auth not in CLIENT_AUTH_VALUES:
            raise ConfigError(
                f"{CLIENT_AUTH}={client_auth}: expected one of {', '.join(CLIENT_AUTH_VALUES)}"
            )
        keystore = properties.get(KEYSTORE_LOCATION, "").strip()
        truststore = properties.get(TRUSTSTORE_LOCATION, "").strip() or None
        if not keystore:
            return None
        if client_auth != "none" and truststore is None:
            raise ConfigError(
                f"{CLIENT_AUTH}={client_auth} checks client certificates: set "
                f"{TRUSTSTORE_LOCATION} to the PEM file of the certificates that sign them"
            )
        return cls(keystore, properties.get("ssl.key.password") or None, truststore, client_auth)
