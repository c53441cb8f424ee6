"""KIP-966 through the whole controller: eligible leader replicas and unclean-shutdown handling,
on a shared in-memory log with the real cluster and replication managers, checked against the
brokers' own replay of the committed records (docs/design/replication.md, "Eligible leader
replicas"; the scenario is S5 of the replication reference: the last replica standing).

Replicas (1, 2, 3), min.insync.replicas 2; broker 1 is the preferred leader.
"""

from __future__ import annotations

from controller_harness import Cluster, controller_view, image_view, replayed_image

from replog.quorum.controller.replication_control import ElectionType, TopicDescription
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.quorum.metadata.records import (
    ELR_VERSION_FEATURE,
    NO_LEADER,
    LeaderRecoveryState,
)

TOPIC = "orders"


def cluster_with(*, elr: bool) -> Cluster:
    cluster = Cluster.with_brokers(
        (1, 2, 3),
        eligible_leader_replicas_enable=elr,
        static_broker_configs={"min.insync.replicas": "2"},
    )
    cluster.create_topic(TOPIC, 1, 3)
    return cluster


def partition(cluster: Cluster) -> PartitionRegistration:
    description: TopicDescription
    (description,) = cluster.active.read(
        lambda ctx: ctx.replication.describe_topics(ctx.offset, [TOPIC])
    )
    (registration,) = description.partitions
    return registration


def fence(cluster: Cluster, broker_id: int) -> None:
    cluster.heartbeat(broker_id, want_fence=True).result()


def unfence(cluster: Cluster, broker_id: int) -> None:
    reply = cluster.heartbeat(broker_id).result()
    assert not reply.is_fenced, reply


def restart(cluster: Cluster, broker_id: int, *, clean: bool) -> None:
    """A new incarnation registers: after a clean shutdown it names the broker epoch its
    predecessor's marker holds, after a crash or power loss none (-1)."""
    previous = cluster.active.cluster.broker_epoch(broker_id) if clean else -1
    assert previous is not None
    cluster.register(broker_id, previous_broker_epoch=previous).result()


def leaves_one_standing(cluster: Cluster) -> tuple[int, int]:
    """The leader L stays; of the other two, one and then the other (E) are fenced: E is the
    ELR, L the last replica standing, which is then fenced too. Returns (L, E)."""
    leader = partition(cluster).leader
    elr_member, first_out = sorted(set((1, 2, 3)) - {leader})
    fence(cluster, first_out)
    assert partition(cluster).elr == ()  # the ISR is still at min ISR: no ELR
    fence(cluster, elr_member)
    assert (partition(cluster).isr, partition(cluster).elr) == ((leader,), (elr_member,))
    fence(cluster, leader)
    return leader, elr_member


def assert_brokers_replay_the_same(cluster: Cluster) -> None:
    image = replayed_image(cluster.log.committed_records())
    view = controller_view(cluster.active, None)
    assert image_view(image)["topics"] == view["topics"]


def test_the_bootstrap_finalizes_the_feature_only_when_enabled() -> None:
    assert cluster_with(elr=True).active.features.finalized_levels()[ELR_VERSION_FEATURE] == 1
    assert ELR_VERSION_FEATURE not in cluster_with(elr=False).active.features.finalized_levels()


def test_the_last_replica_standing_leaves_an_empty_isr_and_joins_the_elr() -> None:
    cluster = cluster_with(elr=True)
    leader, elr_member = leaves_one_standing(cluster)
    standing = partition(cluster)
    assert (standing.leader, standing.isr) == (NO_LEADER, ())
    assert standing.elr == tuple(sorted((leader, elr_member)))
    assert standing.last_known_elr == ()
    assert_brokers_replay_the_same(cluster)


def test_an_unclean_restart_of_the_last_replica_standing_does_not_make_it_leader() -> None:
    cluster = cluster_with(elr=True)
    leader, elr_member = leaves_one_standing(cluster)
    restart(cluster, leader, clean=False)  # power lost: its unsynced tail may be gone
    assert (partition(cluster).elr, partition(cluster).last_known_elr) == ((elr_member,), (leader,))
    unfence(cluster, leader)
    after = partition(cluster)
    # The ELR member holds every commit and will come back; the restarted one must not lead.
    assert (after.leader, after.isr, after.elr) == (NO_LEADER, (), (elr_member,))
    unfence(cluster, elr_member)
    after = partition(cluster)
    assert (after.leader, after.isr, after.elr, after.last_known_elr) == (
        elr_member,
        (elr_member,),
        (),
        (leader,),  # until the ISR is back at min ISR
    )
    assert after.leader_recovery_state == LeaderRecoveryState.RECOVERED
    assert_brokers_replay_the_same(cluster)


def test_a_clean_restart_keeps_the_replica_eligible() -> None:
    cluster = cluster_with(elr=True)
    leader, elr_member = leaves_one_standing(cluster)
    restart(cluster, leader, clean=True)
    assert partition(cluster).elr == tuple(sorted((leader, elr_member)))
    unfence(cluster, leader)
    after = partition(cluster)
    assert (after.leader, after.isr, after.elr) == (leader, (leader,), (elr_member,))
    assert after.leader_recovery_state == LeaderRecoveryState.RECOVERED


def test_when_every_eligible_replica_restarted_uncleanly_only_an_unclean_election_leads() -> None:
    cluster = cluster_with(elr=True)
    leader, elr_member = leaves_one_standing(cluster)
    for broker_id in (elr_member, leader):
        restart(cluster, broker_id, clean=False)
    standing = partition(cluster)
    assert (standing.elr, standing.last_known_elr) == ((), tuple(sorted((leader, elr_member))))
    for broker_id in (1, 2, 3):
        unfence(cluster, broker_id)
    assert partition(cluster).leader == NO_LEADER  # nobody may lead cleanly
    elected = cluster.active.elect_leaders(ElectionType.UNCLEAN, cluster.now_ms, [(TOPIC, 0)])
    cluster.log.commit()
    assert [result.error for result in elected.result()] == [None]
    after = partition(cluster)
    first = after.replicas[0]  # the first acceptable replica: every one is active
    assert (after.leader, after.isr, after.elr, after.last_known_elr) == (first, (first,), (), ())
    assert after.leader_recovery_state == LeaderRecoveryState.RECOVERING
    assert_brokers_replay_the_same(cluster)


def test_without_elr_the_last_replica_standing_leads_again_after_an_unclean_restart() -> None:
    """Kafka's behaviour without KIP-966, and the loss it allows: kept as the last ISR member,
    the restarted replica leads with whatever its log kept."""
    cluster = cluster_with(elr=False)
    leader, _ = leaves_one_standing_without_elr(cluster)
    standing = partition(cluster)
    assert (standing.leader, standing.isr, standing.elr) == (NO_LEADER, (leader,), ())
    restart(cluster, leader, clean=False)
    unfence(cluster, leader)
    after = partition(cluster)
    assert (after.leader, after.isr) == (leader, (leader,))
    assert after.leader_recovery_state == LeaderRecoveryState.RECOVERED


def leaves_one_standing_without_elr(cluster: Cluster) -> tuple[int, int]:
    leader = partition(cluster).leader
    others = sorted(set((1, 2, 3)) - {leader})
    for broker_id in (*others, leader):
        fence(cluster, broker_id)
    return leader, others[0]
