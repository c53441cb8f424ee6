"""The security settings of replog's clients: `security.protocol` and TLS by Kafka's names and
librdkafka's, so one client.properties serves confluent-kafka, `kcat -F` and replog.

`TlsSettings` holds them as config fields (every client kind has them, `config._CommonConfig`);
`client_tls` resolves them into one `ClientTls`: what to trust, what certificate to present,
whether to check the broker's. Pure: files are named here and read where the TLS context is
built (`tls_connection`).

Rules:
- `security.protocol` is PLAINTEXT (the default), SSL, SASL_PLAINTEXT or SASL_SSL; the
  connections of SSL and SASL_SSL are TLS (SASL_SSL: the SASL exchange inside it, its settings
  checked by `wire.sasl_authentication`). Under the plaintext ones the ssl settings are
  ignored, as Kafka's and librdkafka's clients ignore them.
- Trust: one of `ssl.truststore.location` (a PEM file), `ssl.truststore.certificates` (inline
  PEM), `ssl.ca.location` (a PEM file or a directory of them, librdkafka's; `probe`: the
  system's) and `ssl.ca.pem` (inline); none: the system's trusted CAs, as Kafka's client uses
  the JVM's.
- The client's certificate (mutual TLS), one form of: `ssl.keystore.location` (a PEM file of
  key and chain), `ssl.keystore.certificate.chain` with `ssl.keystore.key` (inline PEM),
  `ssl.certificate.location` with `ssl.key.location` (files; the key may be in the
  certificate's file), `ssl.certificate.pem` with `ssl.key.pem`. `ssl.key.password` decrypts
  an encrypted key. Stores are PEM only (`ssl.keystore.type`, `ssl.truststore.type`: PEM or
  unset).
- The broker's certificate must name the host dialled unless
  `ssl.endpoint.identification.algorithm` is empty (Kafka's default `https`); with
  `enable.ssl.certificate.verification=false` (librdkafka's) it is not checked at all.
- Two forms of one thing, or half of a pair, is a `ConfigError` naming the keys.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import TypeVar

from replog.errors import ConfigError

T = TypeVar("T")
PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
# The security protocols whose connections are TLS (SASL_SSL: SASL inside TLS).
TLS_PROTOCOLS = frozenset({SSL, SASL_SSL})
# The SASL settings (config._CommonConfig's; checked by `wire.sasl_authentication`).
SASL_KEYS = frozenset({"sasl.mechanism", "sasl.username", "sasl.password"})
PEM = "PEM"
HOSTNAME_CHECK = "https"
CA_PROBE = "probe"  # librdkafka's ssl.ca.location value for the system's trusted CAs

# Kafka keys of the ssl family with a reason of their own (config._unknown says it).
UNSUPPORTED_TLS_KEYS = {
    "ssl.keystore.password": "a PEM keystore has no password: ssl.key.password decrypts its key",
    "ssl.truststore.password": "a PEM truststore has no password",
}
SSL_FAMILY_REASON = (
    "replog's client reads PEM material only (ssl.truststore.location, ssl.keystore.location, "
    "ssl.ca.location, ssl.certificate.location, ssl.key.location, their inline forms, "
    "ssl.key.password, ssl.endpoint.identification.algorithm)"
)


def _protocol(key: str, raw: object) -> str:
    text = raw.strip().upper() if isinstance(raw, str) else None
    if text not in PROTOCOLS:
        raise ConfigError(f"{key}={raw!r}: accepted values: {', '.join(PROTOCOLS)}")
    return text


def _store_type(key: str, raw: object) -> str | None:
    if raw is None or (isinstance(raw, str) and raw.strip().upper() in ("", PEM)):
        return PEM if raw else None
    raise ConfigError(f"{key}={raw!r}: replog reads PEM only; convert the store to PEM ({key}=PEM)")


def _optional_text(key: str, raw: object) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise ConfigError(f"{key}={raw!r}: must be a string")
    return raw.strip() or None


def _password(key: str, raw: object) -> str | None:
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str):
        raise ConfigError(f"{key}: must be a string")  # the value is a secret: not repeated
    return raw


def _identification(key: str, raw: object) -> bool:
    """Whether the broker's host name is checked (Kafka's `https`, or empty for none)."""
    text = "" if raw is None else raw.strip().lower() if isinstance(raw, str) else None
    if text not in ("", HOSTNAME_CHECK):
        raise ConfigError(f"{key}={raw!r}: accepted values: https, or empty for no host check")
    return text == HOSTNAME_CHECK


def _boolean(key: str, raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise ConfigError(f"{key}={raw!r}: accepted values: true, false")


def _setting(default: T, parse: Callable[[str, object], object]) -> T:
    """A config field: its default and the parser of user values (as `config._setting`)."""
    return field(default=default, metadata={"parse": parse})


@dataclass(frozen=True)
class TlsSettings:
    """The security fields every client config has (module docstring); attribute names are
    the dotted keys with `_` for `.`."""

    security_protocol: str = _setting(PLAINTEXT, _protocol)
    ssl_keystore_type: str | None = _setting(None, _store_type)
    ssl_keystore_location: str | None = _setting(None, _optional_text)
    ssl_keystore_certificate_chain: str | None = _setting(None, _optional_text)
    ssl_keystore_key: str | None = _setting(None, _optional_text)
    ssl_key_password: str | None = _setting(None, _password)
    ssl_truststore_type: str | None = _setting(None, _store_type)
    ssl_truststore_location: str | None = _setting(None, _optional_text)
    ssl_truststore_certificates: str | None = _setting(None, _optional_text)
    ssl_endpoint_identification_algorithm: bool = _setting(True, _identification)
    # librdkafka's names
    ssl_ca_location: str | None = _setting(None, _optional_text)
    ssl_ca_pem: str | None = _setting(None, _optional_text)
    ssl_certificate_location: str | None = _setting(None, _optional_text)
    ssl_certificate_pem: str | None = _setting(None, _optional_text)
    ssl_key_location: str | None = _setting(None, _optional_text)
    ssl_key_pem: str | None = _setting(None, _optional_text)
    enable_ssl_certificate_verification: bool = _setting(True, _boolean)


# The dotted names of the security settings, TLS and SASL (the CLI and the Spark source pass
# them through).
SECURITY_KEYS = frozenset(f.name.replace("_", ".") for f in fields(TlsSettings)) | SASL_KEYS


@dataclass(frozen=True, slots=True)
class Material:
    """One piece of PEM material: a file (`path`) or the PEM itself (`pem`), and the key that
    named it (for messages)."""

    key: str
    path: str | None = None
    pem: str | None = None


@dataclass(frozen=True, slots=True)
class ClientTls:
    """What a client's TLS connections use (module docstring). `trust` None: the system's
    CAs; `certificate` None: no client certificate; `key` None: the key is in the
    certificate's file or PEM."""

    trust: Material | None
    certificate: Material | None
    key: Material | None
    key_password: str | None
    check_hostname: bool
    verify: bool


def client_tls(settings: TlsSettings) -> ClientTls | None:
    """The TLS of `settings` (None under PLAINTEXT). Raises `ConfigError` naming the keys of
    two forms of one thing or half a pair."""
    if settings.security_protocol not in TLS_PROTOCOLS:
        return None
    trust = _one(
        settings,
        "the trusted certificates",
        files=("ssl.truststore.location", "ssl.ca.location"),
        pems=("ssl.truststore.certificates", "ssl.ca.pem"),
    )
    if trust is not None and trust.path == CA_PROBE and trust.key == "ssl.ca.location":
        trust = None
    chain = _one(
        settings,
        "the client certificate",
        files=("ssl.keystore.location", "ssl.certificate.location"),
        pems=("ssl.keystore.certificate.chain", "ssl.certificate.pem"),
    )
    key = _one(
        settings,
        "the client key",
        files=("ssl.key.location",),
        pems=("ssl.keystore.key", "ssl.key.pem"),
    )
    _check_pairs(chain, key)
    return ClientTls(
        trust=trust,
        certificate=chain,
        key=key,
        key_password=settings.ssl_key_password,
        check_hostname=settings.ssl_endpoint_identification_algorithm,
        verify=settings.enable_ssl_certificate_verification,
    )


# A certificate form -> the key form it pairs with (None: the file holds the key too).
_PAIRS: Mapping[str, str | None] = {
    "ssl.keystore.location": None,
    "ssl.keystore.certificate.chain": "ssl.keystore.key",
    "ssl.certificate.location": "ssl.key.location",
    "ssl.certificate.pem": "ssl.key.pem",
}


def _check_pairs(chain: Material | None, key: Material | None) -> None:
    if chain is None:
        if key is not None:
            raise ConfigError(f"{key.key} is set without the certificate it belongs to")
        return
    wanted = _PAIRS[chain.key]
    if key is not None and wanted is None:
        raise ConfigError(f"{key.key}: {chain.key} holds the key already; leave {key.key} unset")
    if key is not None and key.key != wanted:
        raise ConfigError(f"{key.key} does not pair with {chain.key}: use {wanted}")
    if key is None and chain.key == "ssl.keystore.certificate.chain":
        raise ConfigError(f"{chain.key} needs ssl.keystore.key (the chain's private key)")
    if key is None and chain.key == "ssl.certificate.pem":
        raise ConfigError(f"{chain.key} needs ssl.key.pem (the certificate's private key)")


def _one(
    settings: TlsSettings,
    what: str,
    *,
    files: tuple[str, ...],
    pems: tuple[str, ...],
) -> Material | None:
    found = []
    for key in files + pems:
        value = getattr(settings, key.replace(".", "_"))
        if value is not None:
            found.append(Material(key, path=value) if key in files else Material(key, pem=value))
    if len(found) > 1:
        raise ConfigError(
            f"{what} set twice: {' and '.join(m.key for m in found)}; set one of them"
        )
    return found[0] if found else None
