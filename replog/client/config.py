"""Client configs: Kafka's names and defaults, checked once when a client is built.

`producer_config`, `consumer_config` and `admin_config` turn what a user passes (a dict with
Kafka's dotted names, as confluent-kafka takes it, and/or snake_case keyword arguments, as
kafka-python takes them) into a frozen dataclass with snake_case attributes. The two spellings
are one key: ``{"linger.ms": 5}`` and ``linger_ms=5`` set the same field; setting both is an
error.

Rules:
- Values may be given typed (``acks=1``, ``enable_idempotence=False``) or as the strings of a
  properties file (``"1"``, ``"false"``, ``"all"``). `bootstrap.servers` is a comma-separated
  string or a list of ``host[:port]`` (port 9092 when left out, ``[v6 address]:port``, a
  listener prefix such as ``PLAINTEXT://`` dropped). `auto.offset.reset` also takes the old
  names ``smallest``/``largest``.
- `group.protocol` is `classic` (the default) or `consumer` (KIP-848). With `consumer`,
  `partition.assignment.strategy`, `session.timeout.ms` and `heartbeat.interval.ms` are errors
  (the broker decides them) and `group.remote.assignor` names a broker assignor; with
  `classic`, `group.remote.assignor` is an error. Kafka's consumer checks the same.
- `partition.assignment.strategy` takes Kafka's assignor names (range, roundrobin,
  cooperative-sticky; default ``range,cooperative-sticky`` as Kafka's) as a comma-separated
  string or a list; Java's class names of those three are read as their names. Kafka keys
  replog cannot honour (SASL keys beyond librdkafka's `sasl.mechanism`, `sasl.username` and
  `sasl.password`, JKS stores, custom partitioner classes, other assignors) are errors that
  say why.
- `security.protocol` (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL) and the TLS settings, by
  Kafka's and librdkafka's names, are every kind's (`tls_settings`). Under SASL_PLAINTEXT and
  SASL_SSL, `sasl.mechanism` PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 with `sasl.username` and
  `sasl.password`: every connection authenticates, after TLS under SASL_SSL
  (`replog.wire.sasl_authentication`); the password is in no repr.
- Every rejected input is a `ConfigError` whose message names the key, the value and what is
  accepted (a range, a list of values); an unknown key also names the closest known one, and a
  key that belongs to another client kind says so.
- Kafka's cross-checks: `delivery.timeout.ms` must be >= `linger.ms` + `request.timeout.ms`
  when set explicitly (left at its default it is raised to that sum, as Kafka does).
  Idempotence needs `acks=all`, `retries` > 0 and at most 5 requests in flight: an explicit
  ``enable.idempotence=true`` with a conflicting setting is an error; the default quietly turns
  idempotence off (one log line), as Kafka 3.x does. A `transactional.id` needs idempotence:
  with it, ``enable.idempotence=false`` or a conflicting setting is an error (Kafka's
  "Cannot set a transactional.id without also enabling idempotence"). A consumer without
  `group.id` cannot auto-commit: explicit ``enable.auto.commit=true`` is an error, the
  default turns it off.
- `compression.type` is checked against the codecs this process can run (a missing `lz4` or
  `zstandard` package fails here, not at the first send).
- ``user_keys`` records which settings the user gave (dotted names), so clients can tell a
  default from an explicit choice; passing a built config back in with more keywords rebuilds
  it from those settings plus the new ones.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from replog.admin.bootstrap import parse_bootstrap
from replog.client.tls_settings import (
    SECURITY_KEYS,
    SSL_FAMILY_REASON,
    UNSUPPORTED_TLS_KEYS,
    TlsSettings,
    client_tls,
)
from replog.errors import ConfigError
from replog.net_address import format_host_port, parse_host_port
from replog.record.compression import CODEC_NAMES, available_codecs, is_codec_available
from replog.wire.sasl_authentication import SaslCredentials, sasl_settings

__all__ = [
    "CONFIG_KINDS",
    "AdminConfig",
    "ConsumerConfig",
    "ProducerConfig",
    "admin_config",
    "check_client_properties",
    "consumer_config",
    "producer_config",
]

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
DEFAULT_PORT = 9092
IDEMPOTENCE_MAX_IN_FLIGHT = 5
ACKS_ALL = -1

Serializer = Callable[[Any], "bytes | None"]
Deserializer = Callable[["bytes | None"], Any]
Parser = Callable[[str, object], object]
T = TypeVar("T")

# Keys users bring from Kafka that replog knows but does not support: why, instead of "unknown".
_UNSUPPORTED = {
    "partitioner.class": "replog has one built-in partitioner (murmur2, sticky for null keys)",
    "interceptor.classes": "interceptors are not supported",
    **UNSUPPORTED_TLS_KEYS,
}
# Whole families of them (`sasl.username`, Java's `ssl.keystore.password`, ...): every key
# under these prefixes that is no setting.
_UNSUPPORTED_FAMILIES = {
    "sasl.": "replog clients take sasl.mechanism, sasl.username and sasl.password only",
    "ssl.": SSL_FAMILY_REASON,
}


# --- value parsers: (key as the user spelled it, raw value) -> typed value ---------------------


def _bad(key: str, raw: object, accepted: str) -> ConfigError:
    return ConfigError(f"{key}={raw!r}: {accepted}")


def _integer(lo: int, hi: int = INT32_MAX) -> Parser:
    accepted = f"must be an integer in [{lo}, {hi}]"

    def parse(key: str, raw: object) -> int:
        if isinstance(raw, bool):
            raise _bad(key, raw, accepted)
        if isinstance(raw, int):
            value = raw
        elif isinstance(raw, float) and raw.is_integer():
            value = int(raw)
        elif isinstance(raw, str):
            try:
                value = int(raw.strip())
            except ValueError:
                raise _bad(key, raw, accepted) from None
        else:
            raise _bad(key, raw, accepted)
        if not lo <= value <= hi:
            raise _bad(key, raw, accepted)
        return value

    return parse


def _boolean(key: str, raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise _bad(key, raw, "accepted values: true, false")


def _text(key: str, raw: object) -> str:
    if not isinstance(raw, str):
        raise _bad(key, raw, "must be a string")
    return raw


def _optional_text(key: str, raw: object) -> str | None:
    return None if raw is None else _text(key, raw)


def _transactional_id(key: str, raw: object) -> str | None:
    text = _optional_text(key, raw)
    if text is not None and not text:
        raise _bad(
            key, raw, "a non-empty string (leave it unset for a producer without transactions)"
        )
    return text


def _choice(*values: str, aliases: Mapping[str, str] | None = None) -> Parser:
    accepted = f"accepted values: {', '.join(values)}"
    table = {v: v for v in values} | dict(aliases or {})

    def parse(key: str, raw: object) -> str:
        if isinstance(raw, str) and raw.strip().lower() in table:
            return table[raw.strip().lower()]
        raise _bad(key, raw, accepted)

    return parse


# Kafka's assignor names, and the Java class names that mean them.
ASSIGNOR_NAMES = ("range", "roundrobin", "sticky", "cooperative-sticky")
_ASSIGNOR_CLASSES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}


def _assignors(key: str, raw: object) -> tuple[str, ...]:
    accepted = f"expected assignor names out of {', '.join(ASSIGNOR_NAMES)} (comma-separated)"
    if isinstance(raw, str):
        entries = [e.strip() for e in raw.split(",") if e.strip()]
    elif isinstance(raw, (list, tuple)) and all(isinstance(e, str) for e in raw):
        entries = [e.strip() for e in raw]
    else:
        raise _bad(key, raw, accepted)
    names = [_ASSIGNOR_CLASSES.get(e, e.lower()) for e in entries]
    unknown = [e for e, n in zip(entries, names, strict=True) if n not in ASSIGNOR_NAMES]
    if unknown or not names:
        raise _bad(key, raw, f"{accepted}; not known: {', '.join(unknown) or '(empty)'}")
    return tuple(dict.fromkeys(names))


def _acks(key: str, raw: object) -> int:
    accepted = "accepted values: all, -1, 0, 1"
    if isinstance(raw, bool):
        raise _bad(key, raw, accepted)
    text = str(raw).strip().lower() if isinstance(raw, (int, str)) else None
    table = {"all": ACKS_ALL, "-1": ACKS_ALL, "0": 0, "1": 1}
    if text not in table:
        raise _bad(key, raw, accepted)
    return table[text]


def _compression(key: str, raw: object) -> int:
    names = {name: codec for codec, name in CODEC_NAMES.items()}
    accepted = f"accepted values: {', '.join(CODEC_NAMES.values())}"
    codec: int | None
    if raw is None:
        codec = 0
    elif isinstance(raw, str):
        codec = names.get(raw.strip().lower())
    elif isinstance(raw, int) and not isinstance(raw, bool):
        codec = raw if raw in CODEC_NAMES else None
    else:
        codec = None
    if codec is None:
        raise _bad(key, raw, accepted)
    if not is_codec_available(codec):
        usable = ", ".join(CODEC_NAMES[c] for c in sorted(available_codecs()))
        raise _bad(
            key,
            raw,
            f"the {CODEC_NAMES[codec]} package is not installed (pip install "
            f"'replog[compression]'); usable: {usable}",
        )
    return codec


def _servers(key: str, raw: object) -> tuple[str, ...]:
    accepted = "expected 'host[:port],...' or a list of 'host[:port]'"
    if isinstance(raw, str):
        entries = raw.split(",")
    elif isinstance(raw, (list, tuple)) and all(isinstance(e, str) for e in raw):
        entries = list(raw)
    else:
        raise _bad(key, raw, accepted)
    addresses: list[str] = []
    for entry in (e.strip() for e in entries):
        if not entry:
            continue
        scheme, separator, rest = entry.partition("://")
        if separator and scheme.replace("_", "").isalpha():  # PLAINTEXT://host:port, as Kafka
            entry = rest
        try:  # host[:port] or [v6][:port]; an IPv6 host without brackets is refused
            host, port = parse_host_port(entry, "entry", default_port=DEFAULT_PORT, min_port=1)
        except ConfigError as exc:
            raise _bad(key, raw, f"{exc}; {accepted}") from None
        address = format_host_port(host, port)
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise _bad(key, raw, f"no address given; {accepted}")
    return tuple(addresses)


def _controllers(key: str, raw: object) -> tuple[str, ...]:
    if isinstance(raw, (list, tuple)) and not raw:
        return ()
    if not isinstance(raw, (str, list, tuple)):
        raise _bad(key, raw, "expected 'host:port,id@host:port,...' or a list of such entries")
    entries = raw if isinstance(raw, str) else [str(e) for e in raw]
    parse_bootstrap(entries, what=key)  # validates; keeps the id@ prefixes for the admin
    texts = entries.split(",") if isinstance(entries, str) else entries
    return tuple(t.strip() for t in texts if t.strip())


def _callable(key: str, raw: object) -> object:
    if raw is None or callable(raw):
        return raw
    raise _bad(key, raw, "must be a callable or None")


def _timeout_or_inf(key: str, raw: object) -> float:
    accepted = "must be a number of milliseconds >= 0 (inf: no limit)"
    if isinstance(raw, bool):
        raise _bad(key, raw, accepted)
    try:
        value = float(raw) if isinstance(raw, (int, float, str)) else math.nan
    except ValueError:
        raise _bad(key, raw, accepted) from None
    if math.isnan(value) or value < 0:
        raise _bad(key, raw, accepted)
    return value


# a callable setting's field metadata (a plain `field`: its default is a constant)
_CALLABLE = {"parse": _callable}


def _setting(default: T, parse: Parser) -> T:
    """A config field: its default and the parser of user values."""
    return field(default=default, metadata={"parse": parse})


# --- the three config kinds ---------------------------------------------------------------------


@dataclass(frozen=True)
class _CommonConfig(TlsSettings):
    bootstrap_servers: tuple[str, ...] = _setting((f"localhost:{DEFAULT_PORT}",), _servers)
    client_id: str = _setting("replog", _text)
    request_timeout_ms: int = _setting(30_000, _integer(0))
    retry_backoff_ms: int = _setting(100, _integer(0, INT64_MAX))
    retry_backoff_max_ms: int = _setting(1_000, _integer(0, INT64_MAX))
    metadata_max_age_ms: int = _setting(300_000, _integer(0, INT64_MAX))
    # How long every bootstrap address may refuse connections before a call that waits for
    # the cluster fails with that cause (Kafka's name and default).
    socket_connection_setup_timeout_max_ms: int = _setting(30_000, _integer(0, INT64_MAX))
    # How long one connection may take to open and answer ApiVersions (Kafka's name and
    # default): a dead address fails after it, naming the address.
    socket_connection_setup_timeout_ms: int = _setting(10_000, _integer(1, INT64_MAX))
    # SASL on every connection under SASL_PLAINTEXT and SASL_SSL (`security_protocol`, a TLS
    # setting; `replog.wire.sasl_authentication`, checked by `sasl`).
    sasl_mechanism: str = _setting("GSSAPI", _text)
    sasl_username: str | None = _setting(None, _optional_text)
    sasl_password: str | None = field(default=None, repr=False, metadata={"parse": _optional_text})
    # dotted names of the settings the user gave (not a setting itself)
    user_keys: frozenset[str] = field(default=frozenset(), compare=False)

    @property
    def sasl(self) -> SaslCredentials | None:
        """Who every connection authenticates as (None: no SASL)."""
        return sasl_settings(
            self.security_protocol, self.sasl_mechanism, self.sasl_username, self.sasl_password
        )


@dataclass(frozen=True)
class ProducerConfig(_CommonConfig):
    client_id: str = _setting("replog-producer", _text)
    acks: int = _setting(ACKS_ALL, _acks)
    linger_ms: int = _setting(5, _integer(0))
    batch_size: int = _setting(1_000_000, _integer(0))
    compression_type: int = _setting(0, _compression)
    max_request_size: int = _setting(1_048_576, _integer(0))
    buffer_memory: int = _setting(33_554_432, _integer(0, INT64_MAX))
    max_block_ms: int = _setting(60_000, _integer(0, INT64_MAX))
    retries: int = _setting(INT32_MAX, _integer(0))
    delivery_timeout_ms: int = _setting(120_000, _integer(0))
    max_in_flight_requests_per_connection: int = _setting(5, _integer(1))
    enable_idempotence: bool = _setting(True, _boolean)
    # A transactional producer's id (None: not transactional) and the longest a transaction
    # may stay open before the coordinator aborts it.
    transactional_id: str | None = _setting(None, _transactional_id)
    transaction_timeout_ms: int = _setting(60_000, _integer(1))
    partitioner_ignore_keys: bool = _setting(False, _boolean)
    key_serializer: Serializer | None = field(default=None, metadata=_CALLABLE)
    value_serializer: Serializer | None = field(default=None, metadata=_CALLABLE)


@dataclass(frozen=True)
class ConsumerConfig(_CommonConfig):
    client_id: str = _setting("replog-consumer", _text)
    group_id: str | None = _setting(None, _optional_text)
    auto_offset_reset: str = _setting(
        "latest",
        _choice(
            "earliest", "latest", "none", aliases={"smallest": "earliest", "largest": "latest"}
        ),
    )
    enable_auto_commit: bool = _setting(True, _boolean)
    auto_commit_interval_ms: int = _setting(5_000, _integer(0))
    max_poll_records: int = _setting(500, _integer(1))
    fetch_min_bytes: int = _setting(1, _integer(0))
    fetch_max_bytes: int = _setting(52_428_800, _integer(0))
    fetch_max_wait_ms: int = _setting(500, _integer(0))
    max_partition_fetch_bytes: int = _setting(1_048_576, _integer(0))
    # read_committed: up to the last stable offset, aborted transactions skipped (fetcher).
    isolation_level: str = _setting(
        "read_uncommitted", _choice("read_uncommitted", "read_committed")
    )
    check_crcs: bool = _setting(True, _boolean)
    default_api_timeout_ms: int = _setting(60_000, _integer(0))
    consumer_timeout_ms: float = _setting(math.inf, _timeout_or_inf)
    key_deserializer: Deserializer | None = field(default=None, metadata=_CALLABLE)
    value_deserializer: Deserializer | None = field(default=None, metadata=_CALLABLE)
    # Group membership (a subscribe with group.id; docs/groups.md).
    session_timeout_ms: int = _setting(45_000, _integer(0))
    heartbeat_interval_ms: int = _setting(3_000, _integer(0))
    max_poll_interval_ms: int = _setting(300_000, _integer(1))
    partition_assignment_strategy: tuple[str, ...] = _setting(
        ("range", "cooperative-sticky"), _assignors
    )
    group_instance_id: str | None = _setting(None, _optional_text)
    # classic: JoinGroup/SyncGroup; consumer: KIP-848's ConsumerGroupHeartbeat.
    group_protocol: str = _setting("classic", _choice("classic", "consumer"))
    group_remote_assignor: str | None = _setting(None, _optional_text)  # consumer protocol only
    # The consumer's rack: rack-aware assignment (KIP-881 range; the consumer protocol's member
    # rack), as Kafka's client.rack (fetching from the closest replica, KIP-392, is not built).
    client_rack: str | None = _setting(None, _optional_text)


@dataclass(frozen=True)
class AdminConfig(_CommonConfig):
    client_id: str = _setting("replog-admin", _text)
    default_api_timeout_ms: int = _setting(60_000, _integer(0))
    # KIP-919: reach the controllers directly ("host:port" or "id@host:port" entries); empty:
    # find them through the brokers.
    bootstrap_controllers: tuple[str, ...] = _setting((), _controllers)


_KINDS: dict[type[_CommonConfig], str] = {
    ProducerConfig: "producer",
    ConsumerConfig: "consumer",
    AdminConfig: "admin",
}


def _dotted(attribute: str) -> str:
    return attribute.replace("_", ".")


def _parsers(cls: type[_CommonConfig]) -> dict[str, Parser]:
    return {f.name: f.metadata["parse"] for f in dataclasses.fields(cls) if "parse" in f.metadata}


def _unsupported(dotted: str, known: Iterable[str]) -> str | None:
    """Why replog does not take the Kafka key `dotted` (None: it is not one it knows). A key
    of an unsupported family this close to a `known` name is a typo of it, not the family's."""
    why = _UNSUPPORTED.get(dotted)
    if why is None and not difflib.get_close_matches(dotted, known, n=1, cutoff=0.9):
        why = next((w for p, w in _UNSUPPORTED_FAMILIES.items() if dotted.startswith(p)), None)
    return why


def _unknown(cls: type[_CommonConfig], key: str) -> ConfigError:
    kind = _KINDS[cls]
    dotted = _dotted(key.replace(".", "_"))
    known = sorted(_dotted(name) for name in _parsers(cls))
    why = _unsupported(dotted, known)
    if why is not None:
        return ConfigError(f"{key}: not supported by replog: {why}")
    for other, other_kind in _KINDS.items():
        if other is not cls and key.replace(".", "_") in _parsers(other):
            return ConfigError(f"{key}: a {other_kind} config, not a {kind} config")
    close = difflib.get_close_matches(dotted, known, n=1, cutoff=0.5)
    snake = "_" in key and "." not in key  # answer in the spelling the user chose
    names = [name.replace(".", "_") for name in close] if snake else close
    hint = f"; did you mean {names[0]!r}?" if names else f"; known: {', '.join(known)}"
    return ConfigError(f"unknown {kind} config {key!r}{hint}")


def _collect(
    cls: type[_CommonConfig],
    config: Mapping[str, object] | _CommonConfig | None,
    kwargs: Mapping[str, object],
) -> tuple[dict[str, object], frozenset[str]]:
    """Parsed values by attribute for every key given, and the dotted names given.

    A built config passed as `config` contributes the settings its user gave; keywords may
    override those. Within the new inputs each key may appear once, in either spelling.
    """
    parsers = _parsers(cls)
    values: dict[str, object] = {}
    given: list[tuple[object, object]] = list(kwargs.items())
    if isinstance(config, _CommonConfig):
        if not isinstance(config, cls):
            raise ConfigError(f"a {type(config).__name__} given where a {cls.__name__} is needed")
        for dotted in config.user_keys:
            attribute = dotted.replace(".", "_")
            values[attribute] = getattr(config, attribute)
    elif isinstance(config, Mapping):
        given = list(config.items()) + given
    elif config is not None:
        raise ConfigError(f"config must be a mapping of names to values, not {config!r}")
    spelled: dict[str, str] = {}
    for key, raw in given:
        if not isinstance(key, str):
            raise ConfigError(f"config names must be strings, not {key!r}")
        attribute = key.strip().replace(".", "_")
        if attribute not in parsers:
            raise _unknown(cls, key)
        if attribute in spelled:
            raise ConfigError(f"{key}: set twice (also as {spelled[attribute]!r})")
        spelled[attribute] = key
        values[attribute] = parsers[attribute](key, raw)
    return values, frozenset(_dotted(a) for a in values)


C = TypeVar("C", bound=_CommonConfig)


def _construct(
    cls: type[C], config: Mapping[str, object] | _CommonConfig | None, kwargs: Mapping[str, object]
) -> C:
    """The config of kind `cls` from the user's settings, before the kind's cross-checks."""
    values, user_keys = _collect(cls, config, kwargs)
    built = cls(**values, user_keys=user_keys)  # type: ignore[arg-type]
    _ = built.sasl  # the SASL settings, checked once here
    _warn_static_backoff(built)
    client_tls(built)  # two forms of one TLS setting, or half a pair, fail here
    return built


def _warn_static_backoff(built: _CommonConfig) -> None:
    """Kafka keeps such a pair and backs off at a constant retry.backoff.max.ms; say so."""
    if built.retry_backoff_ms > built.retry_backoff_max_ms:
        log.warning(
            "retry.backoff.ms=%d is above retry.backoff.max.ms=%d: a constant backoff of %d ms "
            "applies",
            built.retry_backoff_ms,
            built.retry_backoff_max_ms,
            built.retry_backoff_max_ms,
        )


def producer_config(
    config: Mapping[str, object] | ProducerConfig | None = None, **kwargs: object
) -> ProducerConfig:
    """A checked `ProducerConfig` from Kafka's dotted names and/or snake_case keywords."""
    built = _construct(ProducerConfig, config, kwargs)
    user_keys = built.user_keys
    linger, request = built.linger_ms, built.request_timeout_ms
    if built.delivery_timeout_ms < linger + request:
        if "delivery.timeout.ms" in user_keys:
            raise ConfigError(
                f"delivery.timeout.ms={built.delivery_timeout_ms}: must be >= linger.ms + "
                f"request.timeout.ms = {linger} + {request} = {linger + request}"
            )
        built = dataclasses.replace(built, delivery_timeout_ms=linger + request)
    conflicts = []
    if built.acks != ACKS_ALL:
        conflicts.append(f"acks={built.acks} (needs all)")
    if built.retries == 0:
        conflicts.append("retries=0 (needs > 0)")
    if built.max_in_flight_requests_per_connection > IDEMPOTENCE_MAX_IN_FLIGHT:
        conflicts.append(
            "max.in.flight.requests.per.connection="
            f"{built.max_in_flight_requests_per_connection} (needs <= {IDEMPOTENCE_MAX_IN_FLIGHT})"
        )
    if built.transactional_id is not None and (conflicts or not built.enable_idempotence):
        why = ", ".join(conflicts) or "enable.idempotence=false"
        raise ConfigError(
            f"transactional.id={built.transactional_id!r} needs idempotence, which {why} turns "
            "off: a transactional producer is idempotent"
        )
    if built.enable_idempotence and conflicts:
        if "enable.idempotence" in user_keys:
            raise ConfigError(
                "enable.idempotence=true conflicts with "
                + ", ".join(conflicts)
                + "; change those settings or set enable.idempotence=false"
            )
        log.info("idempotence disabled: %s", ", ".join(conflicts))
        built = dataclasses.replace(built, enable_idempotence=False)
    return built


def consumer_config(
    config: Mapping[str, object] | ConsumerConfig | None = None, **kwargs: object
) -> ConsumerConfig:
    """A checked `ConsumerConfig` from Kafka's dotted names and/or snake_case keywords."""
    built = _construct(ConsumerConfig, config, kwargs)
    user_keys = built.user_keys
    if built.group_id is None and built.enable_auto_commit:
        if "enable.auto.commit" in user_keys:
            raise ConfigError("enable.auto.commit=true needs a group.id (none is set)")
        built = dataclasses.replace(built, enable_auto_commit=False)
    if built.request_timeout_ms <= built.fetch_max_wait_ms:
        raise ConfigError(
            f"request.timeout.ms={built.request_timeout_ms}: must be larger than "
            f"fetch.max.wait.ms={built.fetch_max_wait_ms} (a fetch may wait that long)"
        )
    _check_group_protocol(built)
    if built.heartbeat_interval_ms >= built.session_timeout_ms:
        raise ConfigError(
            f"heartbeat.interval.ms={built.heartbeat_interval_ms}: must be lower than "
            f"session.timeout.ms={built.session_timeout_ms}"
        )
    return built


# Classic-protocol settings the consumer protocol takes from the broker instead (Kafka's
# consumer refuses them too when group.protocol=consumer).
_CLASSIC_ONLY = ("partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms")


def _check_group_protocol(built: ConsumerConfig) -> None:
    if built.group_protocol == "consumer":
        given = [key for key in _CLASSIC_ONLY if key in built.user_keys]
        if given:
            raise ConfigError(
                f"{', '.join(given)}: not supported with group.protocol=consumer (the broker "
                "assigns partitions and sets the heartbeat interval and session timeout: "
                "group.remote.assignor names a broker assignor)"
            )
    elif built.group_remote_assignor is not None:
        raise ConfigError(
            f"group.remote.assignor={built.group_remote_assignor}: only with "
            "group.protocol=consumer (group.protocol is classic)"
        )


def admin_config(
    config: Mapping[str, object] | AdminConfig | None = None, **kwargs: object
) -> AdminConfig:
    """A checked `AdminConfig` from Kafka's dotted names and/or snake_case keywords."""
    return _construct(AdminConfig, config, kwargs)


CONFIG_KINDS: dict[str, type[_CommonConfig]] = {kind: cls for cls, kind in _KINDS.items()}


def config_names(kind: str) -> frozenset[str]:
    """The dotted names of the settings of client `kind` ("producer", "consumer", "admin")."""
    return frozenset(_dotted(name) for name in _parsers(CONFIG_KINDS[kind]))


def security_sasl(properties: Mapping[str, object]) -> SaslCredentials | None:
    """Who a command's clients authenticate as, from the security settings among
    `properties` (any kind's keys; the others are left out). None: no SASL."""
    return admin_config({k: v for k, v in properties.items() if k.strip() in SECURITY_KEYS}).sasl


def check_client_properties(properties: Mapping[str, object], source: str) -> None:
    """Check a properties file meant for any client kind (`--command-config`): every key a
    setting of some kind, every value one it accepts, the TLS settings consistent. A
    `ConfigError` names `source` and the key (an unknown one with the closest known name)."""
    known: dict[str, Parser] = {}
    for cls in _KINDS:
        known.update(_parsers(cls))
    for key, raw in properties.items():
        attribute = key.strip().replace(".", "_")
        if attribute not in known:
            dotted = _dotted(attribute)
            names = sorted(map(_dotted, known))
            why = _unsupported(dotted, names)
            if why is not None:
                raise ConfigError(f"{source}: {key}: not supported by replog: {why}")
            close = difflib.get_close_matches(dotted, names, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"{source}: unknown client config {key!r}{hint}")
        try:
            known[attribute](key, raw)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None
    security = {k: v for k, v in properties.items() if _dotted(k.strip()) in SECURITY_KEYS}
    try:
        admin_config(security)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
