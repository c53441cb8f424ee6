"""The Raft quorum's configuration: the static voter set and the timers, with Kafka's names.

Kafka's dotted property names are accepted in one place, `RaftConfig.from_properties`, and map
to Python fields with the unit before a trailing `_max`
(`controller.quorum.election.backoff.max.ms` is `election_backoff_ms_max`). Defaults are Kafka's.

Grammar of `controller.quorum.voters`::

    voters  = voter ("," voter)*
    voter   = node_id "@" host ":" port      ; host may be a bracketed IPv6 literal
    node_id = non-negative integer, unique in the list
    port    = integer in [1, 65535]

Worked example: ``1@localhost:9093,2@[::1]:9094`` is voter 1 at ("localhost", 9093) and voter
2 at ("::1", 9094).

Rules:
- Every error is a `ConfigError` whose message starts with the property name.
- Properties that do not start with ``controller.quorum.`` belong to other components and are
  ignored; an unknown ``controller.quorum.*`` name is an error (a typo must not silently fall
  back to a default).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Final

from replog.config import parse_integer
from replog.errors import ConfigError

VOTERS_PROPERTY: Final = "controller.quorum.voters"
_PREFIX: Final = "controller.quorum."

# Kafka's name -> RaftConfig field, for every integer property.
PROPERTY_FIELDS: Final[Mapping[str, str]] = {
    "controller.quorum.election.timeout.ms": "election_timeout_ms",
    "controller.quorum.fetch.timeout.ms": "fetch_timeout_ms",
    "controller.quorum.election.backoff.max.ms": "election_backoff_ms_max",
    "controller.quorum.request.timeout.ms": "request_timeout_ms",
    "controller.quorum.append.linger.ms": "append_linger_ms",
    "controller.quorum.retry.backoff.ms": "retry_backoff_ms",
    "controller.quorum.fetch.port": "fetch_port",
    "controller.quorum.append.port": "append_port",
}

MIB: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class VoterAddress:
    """One entry of `controller.quorum.voters`."""

    node_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """Static voter set and timers of one Raft node (all durations in milliseconds)."""

    voters: tuple[VoterAddress, ...]
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_ms_max: int = 1000
    request_timeout_ms: int = 2000
    append_linger_ms: int = 25
    retry_backoff_ms: int = 20
    # Not configurable in Kafka either: backoff unit, long-poll wait, fetch and batch size caps.
    election_backoff_ms_base: int = 100
    fetch_wait_ms_max: int = 500
    fetch_bytes_max: int = 8 * MIB
    append_batch_bytes_max: int = 8 * MIB
    # How long a leader keeps DescribeQuorum state of an observer that stopped fetching.
    observer_session_timeout_ms: int = 300_000
    # Not in Kafka (it answers at once): how long a caught-up Fetch whose only news is a higher
    # high watermark may stay parked, so that the next append carries the news with its records
    # (node.py, "Fetch: leader side"). 0: answer at once, as Kafka does.
    high_watermark_linger_ms: int = 5
    # Not in Kafka: the port of a voter's listener for Raft Fetch connections (the node's host;
    # replog/server/raft/raft_fetch_wire.py), which peers learn over gRPC. 0: any free port.
    fetch_port: int = 0
    # Not in Kafka: the port of a voter's listener for metadata append connections (the node's
    # host; replog/server/raft/metadata_append_wire.py), which callers learn over gRPC. 0: any free
    # port.
    append_port: int = 0

    def __post_init__(self) -> None:
        if not self.voters:
            raise ConfigError(f"{VOTERS_PROPERTY}: needs at least one voter")
        ids = [voter.node_id for voter in self.voters]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"{VOTERS_PROPERTY}: voter ids repeat: {ids}")
        for field in fields(self):
            value = getattr(self, field.name)
            if field.name == "voters":
                continue
            zero_allowed = (
                "append_linger_ms",
                "retry_backoff_ms",
                "high_watermark_linger_ms",
                "fetch_port",
                "append_port",
            )
            minimum = 0 if field.name in zero_allowed else 1
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise ConfigError(f"{_property_name(field.name)}: must be an integer >= {minimum}")
        for port in ("fetch_port", "append_port"):
            if getattr(self, port) > 65535:
                raise ConfigError(f"{_property_name(port)}: must be in [0, 65535]")
        if self.append_port and self.append_port == self.fetch_port:
            # Otherwise the second listener fails at start as if another process held the port.
            raise ConfigError(
                f"{_property_name('append_port')}: {self.append_port} is "
                f"{_property_name('fetch_port')}'s too; the two listeners need their own ports"
            )
        if self.request_timeout_ms <= self.fetch_wait_ms_max:
            # A long-polled Fetch would otherwise time out before the leader answers it.
            raise ConfigError(
                f"{_property_name('request_timeout_ms')}: must exceed the fetch wait "
                f"{self.fetch_wait_ms_max} ms"
            )

    @property
    def voter_ids(self) -> frozenset[int]:
        return frozenset(voter.node_id for voter in self.voters)

    @property
    def check_quorum_timeout_ms(self) -> int:
        """A leader that heard no Fetch from a majority for this long resigns (1.5 x fetch)."""
        return self.fetch_timeout_ms * 3 // 2

    @property
    def begin_quorum_epoch_resend_ms(self) -> int:
        return max(1, self.fetch_timeout_ms // 2)

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> RaftConfig:
        """A config from Kafka-style properties (string values, as read from a file)."""
        if VOTERS_PROPERTY not in properties:
            raise ConfigError(f"{VOTERS_PROPERTY}: required")
        values: dict[str, int] = {}
        for name, text in properties.items():
            if not name.startswith(_PREFIX) or name == VOTERS_PROPERTY:
                continue
            if name not in PROPERTY_FIELDS:
                raise ConfigError(f"{name}: unknown quorum property")
            values[PROPERTY_FIELDS[name]] = _parse_int(name, text)
        return cls(voters=parse_voters(properties[VOTERS_PROPERTY]), **values)


def _property_name(field_name: str) -> str:
    for name, mapped in PROPERTY_FIELDS.items():
        if mapped == field_name:
            return name
    return field_name


def _parse_int(name: str, text: str) -> int:
    """Kafka's reading of an integer (`parse_integer`: a leading '+' is fine, `1_000` is not)."""
    try:
        return parse_integer(text)
    except ValueError:
        raise ConfigError(f"{name}: expected an integer, got {text!r}") from None


def parse_voters(text: str) -> tuple[VoterAddress, ...]:
    """The voters of a `controller.quorum.voters` value (grammar in the module docstring)."""
    voters: list[VoterAddress] = []
    for entry in text.split(","):
        entry = entry.strip()

        def bad(reason: str, entry: str = entry) -> ConfigError:
            return ConfigError(f"{VOTERS_PROPERTY}: {entry!r}: {reason}")

        node_text, at, address = entry.partition("@")
        if not at:
            raise bad("expected id@host:port")
        if not node_text.isdigit() or not node_text.isascii():
            raise bad(f"node id {node_text!r} is not a non-negative integer")
        host, colon, port_text = address.rpartition(":")
        if not colon or not host:
            raise bad("expected host:port after '@'")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        elif ":" in host:
            raise bad("an IPv6 host must be written in brackets")
        if not port_text.isdigit() or not port_text.isascii() or not 1 <= int(port_text) <= 65535:
            raise bad(f"port {port_text!r} is not an integer in [1, 65535]")
        voters.append(VoterAddress(int(node_text), host, int(port_text)))
    ids = [voter.node_id for voter in voters]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{VOTERS_PROPERTY}: voter ids repeat: {ids}")
    return tuple(voters)
