"""SCRAM credentials through a controller failover, on a real three-node cluster: a credential
written through one active controller is known to the next one (a deletion of it is accepted,
not RESOURCE_NOT_FOUND) and to every broker's image (DescribeUserScramCredentials at each)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from replog.admin.kafka_admin_client import KafkaAdminClient
from replog.admin.user_scram_credentials import ScramUserDeletion, ScramUserUpsertion
from replog.errors import ResourceNotFoundError
from tests.eventually import wait_until
from tests.kafka.kafka_cluster import KafkaCluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[KafkaCluster]:
    running = KafkaCluster(tmp_path)
    try:
        running.start()
        yield running
    finally:
        running.stop()


def described_at(address: str) -> dict[str, tuple[tuple[str, int], ...]]:
    with KafkaAdminClient(address) as admin:
        return {
            d.user: d.credentials
            for d in admin.describe_user_scram_credentials()
            if d.error is None
        }


def test_credentials_outlive_the_active_controller(cluster: KafkaCluster) -> None:
    with KafkaAdminClient(cluster.bootstrap) as admin:
        answers = admin.alter_user_scram_credentials(
            upsertions=[ScramUserUpsertion("alice", "SCRAM-SHA-512", "alice-secret", 8192)]
        )
        assert answers == {"alice": None}
        leader = admin.describe_quorum()[0].topics[0].partitions[0].leader_id
    for node in cluster.nodes.values():
        address = f"127.0.0.1:{node.kafka_port}"
        wait_until(
            lambda address=address: (
                described_at(address)  # type: ignore[misc]
                == {"alice": (("SCRAM-SHA-512", 8192),)}
            ),
            f"alice's credential at {address}",
            timeout_s=10,
        )
    cluster.kill(leader)
    survivors = ",".join(f"127.0.0.1:{n.kafka_port}" for n in cluster.alive())
    with KafkaAdminClient(survivors, default_timeout_s=30) as admin:
        # The new active controller replayed the credential: deleting it is accepted, and a
        # second deletion finds nothing.
        answers = admin.alter_user_scram_credentials(
            deletions=[ScramUserDeletion("alice", "SCRAM-SHA-512")]
        )
        assert answers == {"alice": None}
        again = admin.alter_user_scram_credentials(
            deletions=[ScramUserDeletion("alice", "SCRAM-SHA-512")]
        )
        assert isinstance(again["alice"], ResourceNotFoundError)
        new_leader = admin.describe_quorum()[0].topics[0].partitions[0].leader_id
    assert new_leader != leader
    for node in cluster.alive():
        address = f"127.0.0.1:{node.kafka_port}"
        wait_until(
            lambda address=address: described_at(address) == {},  # type: ignore[misc]
            f"alice's credential gone at {address}",
            timeout_s=10,
        )
