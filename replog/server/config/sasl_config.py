"""The SASL settings of a node's SASL_PLAINTEXT and SASL_SSL Kafka listeners, by Kafka's names,
checked once at start-up.

Rules:
- `sasl.enabled.mechanisms` (comma list; Kafka's default GSSAPI is not served here, so a SASL
  listener needs it set), overridden per listener by
  `listener.name.<listener>.sasl.enabled.mechanisms` (the listener name lower-cased, as Kafka
  prefixes it). Served: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; any other is refused naming it.
- PLAIN checks its users against `listener.name.<listener>.plain.sasl.jaas.config`: one
  PlainLoginModule whose `user_NAME="password"` options are the users (Kafka's
  PlainServerCallbackHandler). A listener enabling PLAIN without it is refused naming the key.
- SCRAM needs no JAAS entry here: the credentials are the metadata image's.
- `connections.max.reauth.ms` (default 0: sessions never end), per listener and mechanism
  too (`listener.name.<listener>.<mechanism>.connections.max.reauth.ms`, the mechanism
  lower-cased): the session lifetime KIP-368 gives a client.
- A repr names users, never passwords.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from replog.config import integer_setting
from replog.errors import ConfigError
from replog.kafka.sasl_authenticator import SASL_MECHANISMS
from replog.security.jaas_config import PLAIN_LOGIN_MODULE, parse_jaas_config
from replog.security.plain_server import PLAIN

ENABLED_MECHANISMS = "sasl.enabled.mechanisms"
REAUTH_MS = "connections.max.reauth.ms"
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
SASL_PROPERTIES = frozenset({ENABLED_MECHANISMS, REAUTH_MS})
LISTENER_PREFIX = "listener.name."
# After `listener.name.<listener>.plain`: PLAIN's JAAS entry (a suffix, not a key of its own).
JAAS_SUFFIX = ".sasl.jaas.config"


@dataclass(frozen=True, slots=True)
class SaslListenerConfig:
    """One SASL listener's mechanisms, PLAIN users and session lifetime."""

    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict)
    # Per mechanism: the session lifetime in ms, 0 for none.
    reauth_ms: Mapping[str, int] = field(default_factory=dict)

    def __repr__(self) -> str:
        return (
            f"SaslListenerConfig(mechanisms={self.mechanisms!r}, "
            f"plain_users={sorted(self.plain_users)!r}, reauth_ms={dict(self.reauth_ms)!r})"
        )


def is_listener_sasl_key(key: str) -> bool:
    """A `listener.name.<listener>.` key read here (the settings check knows it)."""
    if not key.startswith(LISTENER_PREFIX):
        return False
    rest = key[len(LISTENER_PREFIX) :].partition(".")[2]
    return rest in (ENABLED_MECHANISMS, PLAIN.lower() + JAAS_SUFFIX) or rest.endswith(
        "." + REAUTH_MS
    )


def sasl_listener_config(name: str, properties: Mapping[str, str]) -> SaslListenerConfig:
    """The SASL settings of listener `name` (module rules)."""
    prefix = f"{LISTENER_PREFIX}{name.lower()}."
    key = prefix + ENABLED_MECHANISMS
    if key not in properties:
        key = ENABLED_MECHANISMS
    text = properties.get(key, "").strip()
    mechanisms = tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    if not mechanisms:
        raise ConfigError(
            f"{key}: the SASL listener {name} needs its mechanisms (Kafka's default GSSAPI is "
            f"not served); set one or more of {', '.join(SASL_MECHANISMS)}"
        )
    unknown = [m for m in mechanisms if m not in SASL_MECHANISMS]
    if unknown:
        raise ConfigError(
            f"{key}={text}: {', '.join(unknown)} not served; the mechanisms served are "
            f"{', '.join(SASL_MECHANISMS)}"
        )
    users: dict[str, str] = {}
    if PLAIN in mechanisms:
        jaas_key = prefix + PLAIN.lower() + JAAS_SUFFIX
        jaas_text = properties.get(jaas_key, "").strip()
        if not jaas_text:
            raise ConfigError(
                f"{jaas_key}: required for PLAIN on listener {name}: "
                f'{PLAIN_LOGIN_MODULE} required user_alice="alice-secret";'
            )
        jaas = parse_jaas_config(jaas_text, jaas_key)
        if jaas.login_module != PLAIN_LOGIN_MODULE:
            raise ConfigError(f"{jaas_key}: the login module must be {PLAIN_LOGIN_MODULE}")
        users = jaas.plain_users()
    reauth_ms: dict[str, int] = {}
    for mechanism in mechanisms:
        mechanism_key = f"{prefix}{mechanism.lower()}.{REAUTH_MS}"
        value_key = mechanism_key if mechanism_key in properties else REAUTH_MS
        value = integer_setting(value_key, properties.get(value_key, "0"))
        if value < 0:
            raise ConfigError(f"{value_key}={value}: must be >= 0 (0: sessions never end)")
        reauth_ms[mechanism] = value
    return SaslListenerConfig(mechanisms, users, reauth_ms)
