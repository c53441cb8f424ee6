"""The metadata quorum's voters as `NodeEndpoint` messages, for answers that name a node by id.

A node that is not the active controller (or not the Raft leader) answers with the id of the
one that is. A client that bootstrapped from a single address needs that node's address too:
DescribeCluster carries the controllers and DescribeQuorum the voters (Kafka's KIP-919 and
KIP-853), read from the answering node's `controller.quorum.voters`.

Rules: the host goes without IPv6 brackets, as `controller.quorum.voters` is parsed; the
client side (`replog.admin.bootstrap.endpoint_addresses`) writes it back as `host:port`.
"""

from __future__ import annotations

from collections.abc import Iterable

from replog.pb import common_pb2
from replog.quorum.raft.config import VoterAddress


def voter_endpoints(voters: Iterable[VoterAddress]) -> list[common_pb2.NodeEndpoint]:
    """One `NodeEndpoint` per voter, in node id order."""
    return [
        common_pb2.NodeEndpoint(node_id=v.node_id, host=v.host, port=v.port)
        for v in sorted(voters, key=lambda v: v.node_id)
    ]
