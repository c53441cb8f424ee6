"""A failed append while an earlier append of the same group is still in flight: the consumer
core undoes only the failed records (Kafka's coordinator reverts to the state before the failed
batch, keeping the batches written before it), so memory stays what the log replays to once
the earlier append completes. The shell reports as failed only records the log refused (an
error before the append: the append of a later batch cannot have happened), so no later batch
exists when a batch fails.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from replog.coordinator.classic_group_coordinator import ClassicGroupConfig, ClassicGroupCoordinator
from replog.coordinator.consumer_group import ConsumerGroup
from replog.coordinator.consumer_group_coordinator import ConsumerGroupCoordinator
from replog.coordinator.consumer_group_messages import ConsumerGroupHeartbeatRequest
from replog.coordinator.consumer_group_records import ConsumerGroupRecord
from replog.coordinator.consumer_member import TP, by_topic
from tests.coordinator.test_consumer_group_properties import TOPICS, new_core

T = TOPICS["t"][0]


def _cores() -> tuple[ClassicGroupCoordinator, ConsumerGroupCoordinator]:
    classic = ClassicGroupCoordinator(ClassicGroupConfig())
    core = new_core(classic)
    classic.other_protocol = core.yield_to_classic
    classic.consumer_groups = core
    return classic, core


def _replayed(log: Sequence[object]) -> ConsumerGroupCoordinator:
    """A new coordinator that replayed `log` (the records the append acknowledged)."""
    _, core = _cores()
    for record in log:
        assert isinstance(record, ConsumerGroupRecord)
        core.replay(record.key, record.value)
    return core


def _fields(group: ConsumerGroup) -> dict[str, object]:
    return {f.name: getattr(group, f.name) for f in dataclasses.fields(group)}


def _join(core: ConsumerGroupCoordinator, member: str) -> tuple[int, list[object]]:
    request = ConsumerGroupHeartbeatRequest(
        "g", member, 0, rebalance_timeout_ms=60_000, subscribed_topic_names=("t",), owned=()
    )
    answer, records = core.heartbeat(request, 0)
    assert answer.error is None, answer
    return answer.member_epoch, list(records)


def test_a_failed_batch_keeps_the_batch_in_flight_before_it() -> None:
    _, core = _cores()
    epoch_a, first = _join(core, "a")
    core.appended(first)
    # b's join is appended (in flight: the replicas have not acknowledged it yet)...
    epoch_b, second = _join(core, "b")
    assert epoch_b == epoch_a + 1
    # ...when a's heartbeat, decided on the group b joined, fails to append.
    owned: frozenset[TP] = frozenset((T, p) for p in range(TOPICS["t"][1]))
    answer, third = core.heartbeat(
        ConsumerGroupHeartbeatRequest("g", "a", epoch_a, owned=by_topic(owned)), 0
    )
    assert answer.error is None and third
    core.append_failed(third, 0)
    # b's join is in the log (its append goes on, and succeeds): b stays a member.
    core.appended(second)
    assert set(core.groups["g"].members) == {"a", "b"}
    assert core.groups["g"].group_epoch == epoch_b
    assert _fields(core.groups["g"]) == _fields(_replayed([*first, *second]).groups["g"])
    # b goes on heartbeating with the epoch it was answered.
    beat, _ = core.heartbeat(ConsumerGroupHeartbeatRequest("g", "b", epoch_b, owned=()), 0)
    assert beat.error is None, beat
