"""The data plane's end-of-run checks, once faults stopped (`replog.sim.run` calls them).

Rules:
- `partitions_replicated`: before the deadline, every data partition has a leader and its full
  ISR in every running broker's image, or (when `committed` is given) is offline by KIP-966 as
  the committed metadata log shows it (`offline_reason`: no leader, neither ISR nor ELR
  members, every replica of its last-known ELR back from an unclean shutdown; only an
  operator's unclean election may lead it). It returns those. A partition offline for any
  other reason is a failure at the deadline, its reason named.
- `acked_batches_readable`: every acknowledged acks=all batch is given, at its offset and with
  the bytes its producer sent, by a fetch from its leader (so below the HW), unless the
  checker excuses a loss since it was sent (`DataChecker.loss_excuse`: power losses of more
  than `replicas - min.insync.replicas` replicas since); on a topic with `flush.messages=1`,
  whatever the power losses. On a partition offline by KIP-966 the batch must be in some
  running replica's log instead, at its offset with its bytes: kept, for an unclean election
  of that replica to bring back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.record.header import iter_frames, read_header
from replog.replication import messages as m
from replog.sim.cluster import SimCluster
from replog.sim.data_invariants import PAYLOAD_START, READ_BYTES, DataChecker, TopicSpec
from replog.sim.invariants import InvariantViolation
from replog.sim.offline_reason import KIP966, offline_reasons
from replog.sim.workload import AckedBatch, DataWorkload

__all__ = ["READABLE_BOUND_S", "acked_batches_readable", "partitions_replicated"]

POLL_S = 0.1
READABLE_BOUND_S = 5.0


def _without_eligible_leader(registration: PartitionRegistration) -> bool:
    return registration.leader < 0 and not registration.isr and not registration.elr


def _unreplicated(
    cluster: SimCluster, specs: tuple[TopicSpec, ...], leaderless: set[tuple[str, int]]
) -> list[str]:
    """What keeps the data partitions from being led and fully replicated, in words, but for
    the partitions without a leader, ISR or ELR, which it adds to `leaderless`."""
    missing: list[str] = []
    for node in cluster.up_nodes():
        broker = node.broker
        if broker is None or broker.replica_manager is None:
            missing.append(f"node {node.node_id}'s data plane is not up")
            continue
        for spec in specs:
            topic = broker.image.topics.by_name.get(spec.name)
            for index in range(spec.partitions):
                registration = None if topic is None else topic.partitions.get(index)
                where = f"{spec.name}-{index} in node {node.node_id}'s image"
                if registration is None:
                    missing.append(f"{where}: absent")
                elif _without_eligible_leader(registration):
                    leaderless.add((spec.name, index))
                elif registration.leader < 0:
                    missing.append(f"{where}: no leader")
                elif sorted(registration.isr) != sorted(registration.replicas):
                    missing.append(f"{where}: ISR {list(registration.isr)}")
    return missing


async def partitions_replicated(
    cluster: SimCluster,
    specs: tuple[TopicSpec, ...],
    deadline: float,
    committed: Callable[[], bytes | bytearray] | None = None,
) -> set[tuple[str, int]]:
    """Module Rules; `deadline`: virtual seconds; `committed`: the longest committed metadata
    log seen (None: no partition may be offline). The partitions offline by KIP-966."""
    while True:
        leaderless: set[tuple[str, int]] = set()
        missing = _unreplicated(cluster, specs, leaderless)
        offline: set[tuple[str, int]] = set()
        if not missing and leaderless and committed is not None:
            reasons = offline_reasons(committed(), sorted(leaderless), cluster.unclean_starts)
            offline = {key for key, reason in reasons.items() if reason == KIP966}
            missing = [
                f"{topic}-{index} has no leader, ISR or ELR, not for KIP-966's reason: {reason}"
                for (topic, index), reason in sorted(reasons.items())
                if reason != KIP966
            ]
        elif leaderless:
            # Sorted: a set of names iterates in another order in another process.
            why = "" if committed is None else " (KIP-966's excuse is judged once all else holds)"
            missing += [
                f"{topic}-{index}: no leader, ISR or ELR{why}"
                for topic, index in sorted(leaderless)
            ]
        if not missing:
            return offline
        if cluster.loop.time() > deadline:
            raise InvariantViolation(
                f"data partitions not led and fully replicated in time: {missing[:4]}"
            )
        await asyncio.sleep(POLL_S)


async def acked_batches_readable(
    cluster: SimCluster,
    workload: DataWorkload,
    checker: DataChecker,
    bound_s: float,
    offline: set[tuple[str, int]],
) -> None:
    """Module Rules; a new leader's HW reaches what it holds only once its followers fetch
    it, so a batch not yet readable is asked again until `bound_s` virtual seconds pass."""
    deadline = cluster.loop.time() + bound_s
    for acked in workload.acked:
        history = checker.history(acked.topic, acked.partition)
        assert history is not None
        # From when it was sent: it was committed, and every replica may have lost power,
        # before its producer heard so.
        if checker.loss_excuse(history, acked.sent_ms) is not None:
            continue
        if (acked.topic, acked.partition) in offline:
            kept = _kept_by_a_replica(cluster, acked)
            if kept is not None:
                raise InvariantViolation(kept)
            continue
        while (unreadable := await _unreadable(cluster, workload, acked)) is not None:
            if cluster.loop.time() > deadline:
                raise InvariantViolation(unreadable)
            await asyncio.sleep(POLL_S)


def _kept_by_a_replica(cluster: SimCluster, acked: AckedBatch) -> str | None:
    """None if a running replica's log holds `acked` at its offset with its bytes; else why
    it is lost (its partition has no leader to ask)."""
    for node in cluster.up_nodes():
        manager = None if node.broker is None else node.broker.replica_manager
        replica = None if manager is None else manager.partition(acked.topic, acked.partition)
        if replica is None or replica.stopped or replica.log.closed:
            continue
        log = replica.log
        if not log.log_start_offset <= acked.base_offset < log.log_end_offset:
            continue
        data = log.read(acked.base_offset, READ_BYTES, log.log_end_offset)
        header = next((read_header(data, p) for p, _ in iter_frames(data)), None)
        if (
            header is not None
            and header.base_offset == acked.base_offset
            and data[PAYLOAD_START : header.size_in_bytes] == acked.payload
        ):
            return None
    lost = sorted({n for at, n in cluster.power_losses if at >= acked.sent_ms})
    return (
        f"{acked.producer}'s acks=all batch acknowledged at {acked.acked_ms} ms at "
        f"{acked.topic}-{acked.partition} offset {acked.base_offset}, a partition offline by "
        f"KIP-966, is in no running replica's log (nodes {lost} lost power since it was sent): "
        "an acknowledged record lost"
    )


async def _unreadable(cluster: SimCluster, workload: DataWorkload, acked: AckedBatch) -> str | None:
    """Why `acked` cannot be read back from its leader now, None when it can."""
    lost = sorted({n for at, n in cluster.power_losses if at >= acked.acked_ms})
    found = workload.leader_of(acked.topic, acked.partition)
    broker = None if found is None else cluster.nodes[found[0]].broker
    if found is None or broker is None:
        return f"{acked.topic}-{acked.partition} has no running leader"
    request = m.FetchRequest(
        (m.FetchPartition(acked.topic, acked.partition, acked.base_offset, 1 << 16),),
        max_wait_ms=0,
    )
    answer = broker.service.fetch(request)
    result = (answer if isinstance(answer, m.FetchResponse) else await answer).partitions[0]
    data = result.records
    header = next((read_header(data, p) for p, _ in iter_frames(data)), None)
    if result.error is not None or header is None or header.base_offset != acked.base_offset:
        if result.error is not None:
            answered = f"{result.error.error_name}: {result.error}"
        elif header is None:
            answered = "no records"
        else:
            answered = f"a batch at offset {header.base_offset}"
        return (
            f"{acked.producer}'s acks=all batch acknowledged at {acked.acked_ms} ms at "
            f"{acked.topic}-{acked.partition} offset {acked.base_offset} is not readable "
            f"there (nodes {lost} lost power since; its leader, node {found[0]}, answers "
            f"{answered}, high watermark {result.high_watermark}): an acknowledged record lost"
        )
    if data[PAYLOAD_START : header.size_in_bytes] != acked.payload:
        return (
            f"{acked.producer}'s acks=all batch at {acked.topic}-{acked.partition} offset "
            f"{acked.base_offset} holds other records than it sent: an acknowledged record "
            "replaced"
        )
    return None
