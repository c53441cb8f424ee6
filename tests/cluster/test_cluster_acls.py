"""ACLs on a 3-node cluster with the authorizer on, ANONYMOUS clients (PLAINTEXT): an ACL added
with `replog acls` reaches every broker (each broker's Metadata answer is asked directly, and
the time from the command's return to the last broker enforcing it is printed), survives a
failover of the active controller (a new ACL is written by its successor) and a full restart of
the cluster.

`allow.everyone.if.no.acl.found=true` lets ANONYMOUS manage ACLs (no ACL names the cluster),
and makes a topic with no ACL open to it; an ACL for someone else then closes the topic to
ANONYMOUS (Kafka's rule: an ACL matching the resource, none applying -> denied), and an ACL
for ANONYMOUS opens it again."""

from __future__ import annotations

import asyncio
import time

from cluster_helpers import LoopbackCluster, replog, wait_for

from replog.admin.kafka_admin_client import KafkaAdminClient
from replog.kafka.messages.create_acls_request import AclCreation
from replog.kafka.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from replog.kafka.messages.metadata_response import MetadataResponse
from replog.wire.kafka_connection import KafkaConnections

AUTHORIZER = (
    "--override",
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "--override",
    "allow.everyone.if.no.acl.found=true",
)
TOPIC = "guarded"
TOPIC_AUTHORIZATION_FAILED = 29


def kafka_addresses(cluster: LoopbackCluster) -> dict[int, str]:
    return {n.node_id: n.kafka_address for n in cluster.layout.nodes if n.kafka_address}


async def _topic_errors(addresses: dict[int, str]) -> dict[int, int | None]:
    """Each broker's Metadata error code for TOPIC (None: that broker did not answer)."""
    connections = KafkaConnections(client_id="acl-test", setup_timeout_ms=2000)
    found: dict[int, int | None] = {}
    try:
        for node_id, address in addresses.items():
            try:
                connection = await connections.get(address)
                answer, _ = await connection.call(
                    MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)]), timeout_ms=3000
                )
            except Exception:
                found[node_id] = None
                continue
            assert isinstance(answer, MetadataResponse)
            found[node_id] = answer.topics[0].error_code
    finally:
        await connections.close()
    return found


def topic_errors(addresses: dict[int, str]) -> dict[int, int | None]:
    return asyncio.run(_topic_errors(addresses))


def acls(cluster: LoopbackCluster, *args: str) -> str:
    bootstrap = ",".join(kafka_addresses(cluster).values())
    done = replog("acls", *args, "--bootstrap-server", bootstrap, "--timeout", "30")
    assert done.returncode == 0, done.stderr
    return done.stdout


def enforced_everywhere(cluster: LoopbackCluster, code: int, what: str) -> float:
    """Seconds until every broker answers TOPIC with `code`."""
    started = time.monotonic()
    addresses = kafka_addresses(cluster)
    wait_for(lambda: set(topic_errors(addresses).values()) == {code}, 20, what)
    return time.monotonic() - started


def test_acls_reach_every_broker_and_survive_failover_and_restart(
    cluster: LoopbackCluster,
) -> None:
    cluster.start(*AUTHORIZER)
    created = replog(
        "topics", "create", "--topic", TOPIC, "--partitions", "3", "--replication-factor", "3",
        "--bootstrap-server", ",".join(kafka_addresses(cluster).values()),
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    enforced_everywhere(cluster, 0, "the topic open to ANONYMOUS on every broker")

    acls(
        cluster,
        "--add",
        "--allow-principal",
        "User:someone",
        "--operation",
        "Read",
        "--topic",
        TOPIC,
    )
    closed_s = enforced_everywhere(cluster, TOPIC_AUTHORIZATION_FAILED, "ANONYMOUS refused")
    # The next one through an admin client in this process: timed from CreateAcls' answer (the
    # controller answers once the record commits), not from a command's exit.
    with KafkaAdminClient(list(kafka_addresses(cluster).values())) as admin:
        (created,) = admin.create_acls(
            [
                AclCreation(
                    resource_type=2, resource_name=TOPIC, resource_pattern_type=3,
                    principal="User:ANONYMOUS", host="*", operation=8, permission_type=3,
                )
            ]
        )  # fmt: skip
        opened_s = enforced_everywhere(cluster, 0, "ANONYMOUS allowed on every broker")
    assert created.error_code == 0
    print(f"ACL enforced by all 3 brokers: {closed_s * 1000:.0f} ms after `replog acls --add` "
          f"exited, {opened_s * 1000:.0f} ms after CreateAcls answered")  # fmt: skip

    leader = cluster.wait_for_leader().leader_id
    epoch = cluster.describe().leader_epoch
    cluster.kill(leader)
    cluster.wait_for_leader(after_epoch=epoch)
    acls(
        cluster,
        "--add",
        "--deny-principal",
        "User:ANONYMOUS",
        "--operation",
        "Describe",
        "--topic",
        TOPIC,
    )
    alive = {n: a for n, a in kafka_addresses(cluster).items() if n != leader}
    wait_for(
        lambda: set(topic_errors(alive).values()) == {TOPIC_AUTHORIZATION_FAILED},
        20,
        "the deny written by the new active controller enforced",
    )
    cluster.restart(leader)
    enforced_everywhere(cluster, TOPIC_AUTHORIZATION_FAILED, "the restarted node enforcing it")
    listed = acls(cluster, "--list", "--topic", TOPIC)
    assert listed.count("(principal=") == 3, listed

    stopped = cluster.cli("stop")
    assert stopped.returncode == 0, stopped.stderr
    cluster.start(planned=False)
    enforced_everywhere(cluster, TOPIC_AUTHORIZATION_FAILED, "the deny after a full restart")
    assert sorted(acls(cluster, "--list", "--topic", TOPIC).splitlines()) == sorted(
        listed.splitlines()
    )
