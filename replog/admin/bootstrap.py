"""The bootstrap server list a client starts from: Kafka's `--bootstrap-server` convention.

`host:port,host:port,...`, tried in turn. An entry may be written `id@host:port`, as in
`controller.quorum.voters`, to also say which node listens there: a client that is told "the
active controller is node 3" can then go to node 3 directly.

Rules: the order of the addresses is kept (it is the order they are tried in) and duplicates
are dropped; an IPv6 host is written in brackets (`[::1]:9092`, `net_address`); a malformed
entry is a `ConfigError` naming the entry and what was expected.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from replog.errors import ConfigError
from replog.net_address import format_host_port, parse_host_port

if TYPE_CHECKING:
    from replog.pb.common_pb2 import NodeEndpoint


@dataclass(frozen=True, slots=True)
class Bootstrap:
    """Addresses to try in turn, and the node ids known to listen at some addresses."""

    addresses: tuple[str, ...]
    node_addresses: Mapping[int, str] = field(default_factory=dict)


def parse_bootstrap(entries: str | Iterable[str], *, what: str = "bootstrap servers") -> Bootstrap:
    """`"host:port,id@host:port"` (or a sequence of such entries) -> `Bootstrap`.

    `what` names the setting in error messages (e.g. "--bootstrap-server").
    """
    texts = entries.split(",") if isinstance(entries, str) else list(entries)
    addresses: list[str] = []
    named: dict[int, str] = {}
    for text in texts:
        entry = text.strip()
        node_text, at, written = entry.rpartition("@")
        bad_id = at and not (node_text.isascii() and node_text.isdigit())
        if not entry or bad_id:
            raise ConfigError(f"{what}: {entry!r}: expected host:port (or id@host:port)")
        # Written back in one spelling ([::1]:9092 for an IPv6 host), the form gRPC dials.
        address = format_host_port(*parse_host_port(written, f"{what}:"))
        if address not in addresses:
            addresses.append(address)
        if at:
            named[int(node_text)] = address
    if not addresses:
        raise ConfigError(f"{what}: no address given")
    return Bootstrap(tuple(addresses), named)


def endpoint_addresses(endpoints: Iterable[NodeEndpoint]) -> dict[int, str]:
    """Node id -> `host:port` of the `NodeEndpoint`s an answer carries (DescribeCluster's
    controllers, DescribeQuorum's nodes); entries without a host or port are left out."""
    return {e.node_id: format_host_port(e.host, e.port) for e in endpoints if e.host and e.port}
