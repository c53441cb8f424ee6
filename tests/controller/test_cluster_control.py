"""ClusterControl: registration, heartbeats, fencing, unfencing, controlled shutdown
(docs/design/kraft.md#broker-lifecycle), driven directly with a scripted replication manager."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from uuid import UUID

import pytest

from replog.errors import (
    BrokerIdNotRegisteredError,
    DuplicateBrokerRegistrationError,
    InconsistentClusterIdError,
    InvalidRequestError,
    MetadataReplayError,
    StaleBrokerEpochError,
    UnsupportedVersionError,
)
from replog.quorum.controller.broker_heartbeat import (
    BrokerHeartbeatReply,
    BrokerHeartbeatRequest,
    BrokerState,
    next_broker_state,
)
from replog.quorum.controller.broker_liveness import BrokerLiveness
from replog.quorum.controller.cluster_control import (
    BrokerRegistrationReply,
    BrokerRegistrationRequest,
    ClusterControl,
)
from replog.quorum.controller.controller_result import ControllerResult
from replog.quorum.controller.feature_control import FeatureControl
from replog.quorum.metadata.broker_lifecycle import SUPPORTED_FEATURES
from replog.quorum.metadata.fence_notices import FenceNotice
from replog.quorum.metadata.records import (
    METADATA_VERSION_FEATURE,
    BrokerRegistrationChangeRecord,
    FeatureLevelRecord,
    FeatureRange,
    FenceChange,
    MetadataRecord,
    NoOpRecord,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)
from replog.timeline import SnapshotRegistry

CLUSTER = "c1"
FEATURES = SUPPORTED_FEATURES
TIMEOUT = 9000


@dataclass
class ScriptedReplication:
    """A replication manager whose answers the test sets: which brokers lead something, and
    which records each broker event produces (NoOps stand in for partition changes)."""

    leaders: set[int] = field(default_factory=set)
    on_fenced: dict[int, tuple[MetadataRecord, ...]] = field(default_factory=dict)
    on_unfenced: dict[int, tuple[MetadataRecord, ...]] = field(default_factory=dict)
    on_shutdown: dict[int, tuple[MetadataRecord, ...]] = field(default_factory=dict)
    calls: list[tuple[str, int]] = field(default_factory=list)

    def replay(self, record: object, offset: int) -> None:
        raise AssertionError("cluster control never replays partition records")

    def handle_broker_fenced(
        self, broker_id: int, *, max_records: int | None = None
    ) -> Sequence[MetadataRecord]:
        self.calls.append(("fenced", broker_id))
        return self.on_fenced.get(broker_id, ())[:max_records]

    def handle_broker_unregistered(
        self, broker_id: int, *, max_records: int | None = None
    ) -> Sequence[MetadataRecord]:
        self.calls.append(("unregistered", broker_id))
        return self.on_fenced.get(broker_id, ())[:max_records]

    def handle_broker_unclean_shutdown(
        self, broker_id: int, *, max_records: int | None = None
    ) -> Sequence[MetadataRecord]:
        self.calls.append(("unclean", broker_id))
        return self.on_fenced.get(broker_id, ())[:max_records]

    def handle_broker_unfenced(self, broker_id: int, *, max_records: int) -> ControllerResult[None]:
        self.calls.append(("unfenced", broker_id))
        return ControllerResult.of(self.on_unfenced.get(broker_id, ())[:max_records], None)

    def handle_controlled_shutdown(
        self, broker_id: int, *, max_records: int | None = None
    ) -> Sequence[MetadataRecord]:
        self.calls.append(("shutdown", broker_id))
        return self.on_shutdown.get(broker_id, ())[:max_records]

    def has_leaderships(self, broker_id: int) -> bool:
        return broker_id in self.leaders

    def topic_exists(self, topic_name: str) -> bool:
        return False


class Harness:
    """ClusterControl plus a write offset: `apply` replays a result as the controller would."""

    def __init__(self) -> None:
        self.registry = SnapshotRegistry()
        self.features = FeatureControl(self.registry)
        self.features.replay(FeatureLevelRecord(METADATA_VERSION_FEATURE, 7), 0)
        self.cluster = ClusterControl(self.registry, cluster_id=CLUSTER, features=self.features)
        self.replication = ScriptedReplication()
        self.next_offset = 1
        self.now_ms = 0
        self.cluster.activate(self.now_ms)

    def apply(self, result: ControllerResult[object]) -> int:
        """Replay the result's records at the next offsets; return the last offset."""
        for record in result.records:
            if not isinstance(record, NoOpRecord):
                assert isinstance(
                    record,
                    RegisterBrokerRecord | UnregisterBrokerRecord | BrokerRegistrationChangeRecord,
                )
                self.cluster.replay(record, self.next_offset)
            self.next_offset += 1
        last = self.next_offset - 1
        if result.on_batch_end is not None:
            result.on_batch_end(last)
        return last

    def register(
        self,
        broker_id: int,
        incarnation: UUID | None = None,
        *,
        features: tuple[FeatureRange, ...] = FEATURES,
        cluster_id: str = CLUSTER,
        rack: str | None = None,
        previous_broker_epoch: int = -1,
    ) -> ControllerResult[BrokerRegistrationReply]:
        request = BrokerRegistrationRequest(
            broker_id,
            cluster_id,
            incarnation or uuid.uuid4(),
            features=features,
            rack=rack,
            previous_broker_epoch=previous_broker_epoch,
        )
        return self.cluster.register_broker(
            request,
            next_write_offset=self.next_offset,
            now_ms=self.now_ms,
            replication=self.replication,
        )

    def heartbeat(
        self,
        broker_id: int,
        metadata_offset: int,
        *,
        want_fence: bool = False,
        want_shut_down: bool = False,
        broker_epoch: int | None = None,
    ) -> tuple[ControllerResult[BrokerHeartbeatReply], BrokerHeartbeatReply]:
        epoch = self.cluster.broker_epoch(broker_id) if broker_epoch is None else broker_epoch
        assert epoch is not None
        result = self.cluster.process_heartbeat(
            BrokerHeartbeatRequest(broker_id, epoch, metadata_offset, want_fence, want_shut_down),
            now_ms=self.now_ms,
            replication=self.replication,
        )
        self.apply(result)
        return result, result.response

    def started(self, broker_id: int, rack: str | None = None) -> int:
        """Register and unfence a broker; return its broker epoch."""
        result = self.register(broker_id, rack=rack)
        self.apply(result)
        _, reply = self.heartbeat(broker_id, self.next_offset - 1)
        assert not reply.is_fenced
        return result.response.broker_epoch


@pytest.fixture
def h() -> Harness:
    return Harness()


# -- registration ---------------------------------------------------------------------------------


def test_a_new_broker_gets_the_offset_of_its_registration_record_as_epoch(h: Harness) -> None:
    h.next_offset = 41
    result = h.register(3, rack="r1")
    (record,) = result.records
    assert isinstance(record, RegisterBrokerRecord)
    assert record.broker_epoch == 41 == result.response.broker_epoch
    assert record.fenced and not record.in_controlled_shutdown
    assert h.apply(result) == 41
    registration = h.cluster.registration(3)
    assert registration is not None and registration.fenced and registration.rack == "r1"
    assert h.cluster.registration_offset(3) == 41
    assert h.cluster.is_registered(3) and not h.cluster.is_active(3)


def test_the_cluster_id_must_match(h: Harness) -> None:
    with pytest.raises(
        InconsistentClusterIdError, match="cluster 'other', but this is cluster 'c1'"
    ):
        h.register(1, cluster_id="other")
    assert InconsistentClusterIdError.code == 104


def test_a_broker_id_must_not_be_negative(h: Harness) -> None:
    with pytest.raises(InvalidRequestError, match="broker id -1"):
        h.register(-1)


def test_the_broker_must_support_the_finalized_metadata_version(h: Harness) -> None:
    with pytest.raises(UnsupportedVersionError, match=r"metadata.version levels 1..5.*level is 7"):
        h.register(1, features=(FeatureRange(METADATA_VERSION_FEATURE, 1, 5),))
    with pytest.raises(UnsupportedVersionError, match="does not advertise"):
        h.register(1, features=())


def test_another_incarnation_cannot_take_a_live_unfenced_session(h: Harness) -> None:
    h.started(1)
    with pytest.raises(DuplicateBrokerRegistrationError, match="live session"):
        h.register(1, uuid.UUID(int=2))
    assert DuplicateBrokerRegistrationError.code == 101
    # Once the session expires, the new incarnation may register.
    h.now_ms += TIMEOUT
    result = h.register(1, uuid.UUID(int=2))
    assert isinstance(result.records[-1], RegisterBrokerRecord)


def test_the_successor_of_a_clean_shutdown_takes_a_live_session_at_once(h: Harness) -> None:
    """The new incarnation names the live one's epoch, read from the clean-shutdown marker that
    one wrote as it stopped: nothing is left to wait for (cluster_control.succeeds_cleanly)."""
    epoch = h.started(1)
    h.replication.on_fenced[1] = (NoOpRecord(),)
    result = h.register(1, uuid.UUID(int=2), previous_broker_epoch=epoch)
    assert result.records[0] == NoOpRecord()  # the old one moved out first, as after expiry
    assert result.records[-1] == RegisterBrokerRecord(
        1, uuid.UUID(int=2), h.next_offset + 1, features=FEATURES
    )


@pytest.mark.parametrize("named", [-1, 0, "another"])
def test_a_registration_naming_no_or_another_epoch_still_waits_out_the_session(
    h: Harness, named: int | str
) -> None:
    epoch = h.started(1)
    previous = epoch + 1 if named == "another" else int(named)
    with pytest.raises(DuplicateBrokerRegistrationError, match="live session"):
        h.register(1, uuid.UUID(int=2), previous_broker_epoch=previous)


def test_a_fenced_registration_can_be_taken_over_at_once(h: Harness) -> None:
    h.apply(h.register(1, uuid.UUID(int=1)))
    result = h.register(1, uuid.UUID(int=2))
    assert result.records[-1] == RegisterBrokerRecord(
        1, uuid.UUID(int=2), h.next_offset, features=FEATURES
    )


def test_a_new_incarnation_first_moves_the_old_one_out_of_isrs(h: Harness) -> None:
    h.started(1)
    h.replication.on_fenced[1] = (NoOpRecord(), NoOpRecord())
    h.now_ms += TIMEOUT
    result = h.register(1, uuid.UUID(int=9))
    assert result.records[:2] == (NoOpRecord(), NoOpRecord())
    # The epoch is the offset of the registration record, after the two cleanup records.
    assert result.response.broker_epoch == h.next_offset + 2
    assert h.apply(result) == result.response.broker_epoch
    assert h.cluster.broker_epoch(1) == result.response.broker_epoch


@pytest.mark.parametrize("named", [-1, "another"])
def test_a_new_incarnation_naming_no_or_another_epoch_shut_down_uncleanly(
    h: Harness, named: int | str
) -> None:
    """KIP-966: its predecessor left no clean-shutdown marker for the live epoch, so its log
    may have lost its unsynced tail: it leaves every ISR and ELR, not just the ISRs."""
    epoch = h.started(1)
    h.replication.calls.clear()
    h.now_ms += TIMEOUT
    h.register(1, uuid.UUID(int=9), previous_broker_epoch=-1 if named == -1 else epoch + 1)
    assert ("unclean", 1) in h.replication.calls
    assert ("fenced", 1) not in h.replication.calls


def test_the_successor_of_a_clean_shutdown_only_leaves_isrs_and_leaderships(h: Harness) -> None:
    epoch = h.started(1)
    h.replication.calls.clear()
    h.register(1, uuid.UUID(int=9), previous_broker_epoch=epoch)
    assert ("fenced", 1) in h.replication.calls
    assert ("unclean", 1) not in h.replication.calls


def test_a_retried_registration_keeps_its_epoch_and_flags(h: Harness) -> None:
    incarnation = uuid.UUID(int=5)
    first = h.register(5, incarnation)
    h.apply(first)
    h.heartbeat(5, h.next_offset - 1)  # unfenced now
    again = h.register(5, incarnation)
    (record,) = again.records
    assert isinstance(record, RegisterBrokerRecord)
    assert record.broker_epoch == first.response.broker_epoch == again.response.broker_epoch
    assert not record.fenced
    h.apply(again)
    # The broker must now catch up to its newer registration record.
    assert h.cluster.registration_offset(5) == h.next_offset - 1


# -- heartbeats: the state machine ------------------------------------------------------------

F, U, CS, SN = (
    BrokerState.FENCED,
    BrokerState.UNFENCED,
    BrokerState.CONTROLLED_SHUTDOWN,
    BrokerState.SHUTDOWN_NOW,
)


@pytest.mark.parametrize(
    (
        "current",
        "offset",
        "want_fence",
        "want_shut_down",
        "leads",
        "shutdown_at",
        "lowest",
        "next_",
    ),
    [
        (F, 0, False, True, False, None, -1, SN),
        (F, 10, False, False, False, None, -1, U),
        (F, 9, False, False, False, None, -1, F),  # not caught up to its registration at 10
        (F, 10, True, False, False, None, -1, F),  # caught up but not ready
        (U, 10, True, True, False, None, -1, SN),
        (U, 10, True, False, True, None, -1, F),
        (U, 10, False, True, True, None, -1, CS),
        (U, 10, False, True, False, None, -1, SN),
        (U, 10, False, False, True, None, -1, U),
        (CS, 10, False, True, True, 20, 30, CS),  # still leads something
        (CS, 10, False, True, False, 20, 19, CS),  # an active broker has not applied 20
        (CS, 10, False, True, False, 20, 20, SN),
    ],
)
def test_next_broker_state(
    current: BrokerState,
    offset: int,
    want_fence: bool,
    want_shut_down: bool,
    leads: bool,
    shutdown_at: int | None,
    lowest: int,
    next_: BrokerState,
) -> None:
    request = BrokerHeartbeatRequest(1, 10, offset, want_fence, want_shut_down)
    state = next_broker_state(
        current,
        request,
        registration_offset=10,
        has_leaderships=leads,
        controlled_shutdown_offset=shutdown_at,
        lowest_active_offset=lowest,
    )
    assert state is next_


def test_a_heartbeat_must_name_the_current_broker_epoch(h: Harness) -> None:
    epoch = h.started(1)
    with pytest.raises(StaleBrokerEpochError, match="broker epoch 99, but its registration has"):
        h.heartbeat(1, 0, broker_epoch=99)
    with pytest.raises(StaleBrokerEpochError, match=r"broker 7 .* is not registered"):
        h.heartbeat(7, 0, broker_epoch=epoch)
    assert StaleBrokerEpochError.code == 77


def test_unfencing_needs_the_request_and_the_catch_up(h: Harness) -> None:
    result = h.register(1)
    registered_at = h.apply(result)
    h.replication.on_unfenced[1] = (NoOpRecord(),)
    # Behind its own registration record: stays fenced, not caught up.
    behind, reply = h.heartbeat(1, registered_at - 1)
    assert not behind.records
    assert reply == BrokerHeartbeatReply(False, True, False, False)
    # Caught up, but still recovering (want_fence): stays fenced.
    waiting, reply = h.heartbeat(1, registered_at, want_fence=True)
    assert not waiting.records
    assert reply == BrokerHeartbeatReply(True, True, False, False)
    # Caught up and ready: unfenced; the registration change comes before the elections.
    unfenced, reply = h.heartbeat(1, registered_at)
    assert unfenced.records == (
        BrokerRegistrationChangeRecord(1, registered_at, FenceChange.UNFENCE),
        NoOpRecord(),
    )
    assert reply == BrokerHeartbeatReply(True, False, False, False)
    assert h.cluster.is_active(1)
    # Nothing more to do on the next heartbeat.
    steady, reply = h.heartbeat(1, registered_at + 5)
    assert not steady.records and not reply.is_fenced


def test_want_fence_fences_an_unfenced_broker(h: Harness) -> None:
    epoch = h.started(1)
    h.replication.on_fenced[1] = (NoOpRecord(),)
    result, reply = h.heartbeat(1, 100, want_fence=True)
    assert result.records == (
        NoOpRecord(),
        BrokerRegistrationChangeRecord(1, epoch, FenceChange.FENCE),
    )
    assert reply.is_fenced and not reply.should_shut_down
    assert not h.cluster.is_active(1)


def test_controlled_shutdown_waits_for_leaderships_and_for_active_brokers(h: Harness) -> None:
    epoch1 = h.started(1)
    h.started(2)
    h.started(3)
    h.replication.leaders = {1}
    h.replication.on_shutdown[1] = (NoOpRecord(),)
    started, reply = h.heartbeat(1, 10, want_shut_down=True)
    assert started.records == (
        BrokerRegistrationChangeRecord(1, epoch1, in_controlled_shutdown=True),
        NoOpRecord(),
    )
    shutdown_offset = h.next_offset - 1
    assert reply == BrokerHeartbeatReply(True, False, True, False)
    assert h.cluster.in_controlled_shutdown(1) and not h.cluster.is_active(1)
    # Still leading: stays in controlled shutdown, no more records.
    again, reply = h.heartbeat(1, 10, want_shut_down=True)
    assert not again.records and reply.in_controlled_shutdown
    # Leaderships moved, but broker 3 has not applied the shutdown records yet.
    h.replication.leaders = set()
    h.heartbeat(2, shutdown_offset)
    h.heartbeat(3, shutdown_offset - 1)
    waiting, reply = h.heartbeat(1, 10, want_shut_down=True)
    assert not waiting.records and reply.in_controlled_shutdown and not reply.should_shut_down
    # Every active broker applied them: shut down now (fenced).
    h.heartbeat(3, shutdown_offset)
    done, reply = h.heartbeat(1, 10, want_shut_down=True)
    assert done.records == (BrokerRegistrationChangeRecord(1, epoch1, FenceChange.FENCE),)
    assert reply == BrokerHeartbeatReply(True, True, False, True)
    # A later heartbeat asking to shut down is told so again, with nothing more to write.
    later, reply = h.heartbeat(1, 10, want_shut_down=True)
    assert not later.records and reply.should_shut_down
    # The incarnation that began to leave may not come back: it stays fenced until it
    # registers again (else it would be unfenced, electable, and refused in every ISR).
    back, reply = h.heartbeat(1, h.next_offset)
    assert not back.records and reply.is_fenced and not reply.should_shut_down
    assert not h.cluster.is_active(1)


def test_a_broker_leading_nothing_shuts_down_at_once(h: Harness) -> None:
    epoch = h.started(1)
    result, reply = h.heartbeat(1, 10, want_shut_down=True)
    assert result.records == (BrokerRegistrationChangeRecord(1, epoch, FenceChange.FENCE),)
    assert reply.should_shut_down and reply.is_fenced


def test_a_broker_whose_session_forgot_its_shutdown_enters_it_again(h: Harness) -> None:
    epoch = h.started(1)
    h.replication.leaders = {1}
    h.heartbeat(1, 10, want_shut_down=True)
    # Failover: a new active controller has fresh sessions and no shutdown offset.
    h.cluster.deactivate()
    h.cluster.activate(h.now_ms)
    result, reply = h.heartbeat(1, 10, want_shut_down=True)
    # Already in controlled shutdown per its registration: only the partition records again.
    assert ("shutdown", 1) in h.replication.calls
    assert BrokerRegistrationChangeRecord(1, epoch, in_controlled_shutdown=True) not in (
        result.records
    )
    assert reply.in_controlled_shutdown


# -- session expiry --------------------------------------------------------------------------------


def test_an_unfenced_broker_is_stale_exactly_at_the_session_timeout(h: Harness) -> None:
    h.started(1)
    h.now_ms = 1000
    h.started(2)
    assert h.cluster.next_session_expiry_ms(h.now_ms) == TIMEOUT
    assert h.cluster.find_stale_broker(TIMEOUT - 1) is None
    assert h.cluster.find_stale_broker(TIMEOUT) == 1
    # A heartbeat renews the session.
    h.now_ms = TIMEOUT - 1
    h.heartbeat(1, 0)
    assert h.cluster.find_stale_broker(TIMEOUT) is None
    assert h.cluster.next_session_expiry_ms(h.now_ms) == 1000 + TIMEOUT
    assert h.cluster.find_stale_broker(1000 + TIMEOUT) == 2


def test_the_oldest_expired_session_goes_first_and_fenced_brokers_never_expire(
    h: Harness,
) -> None:
    h.now_ms = 5
    h.started(2)
    h.now_ms = 0
    h.started(1)
    h.apply(h.register(3))  # fenced: no session to expire
    assert h.cluster.find_stale_broker(20_000) == 1
    epoch1 = h.cluster.broker_epoch(1)
    assert epoch1 is not None
    result = h.cluster.fence_stale_broker(1, replication=h.replication)
    assert result.records == (BrokerRegistrationChangeRecord(1, epoch1, FenceChange.FENCE),)
    h.apply(result)
    assert h.cluster.find_stale_broker(20_000) == 2
    h.apply(h.cluster.fence_stale_broker(2, replication=h.replication))
    assert h.cluster.find_stale_broker(20_000) is None
    assert h.cluster.next_session_expiry_ms(20_000) is None
    # Fencing an already fenced broker writes nothing.
    assert not h.cluster.fence_stale_broker(2, replication=h.replication).records


def test_activation_starts_every_session_afresh(h: Harness) -> None:
    h.started(1)
    h.cluster.deactivate()
    with pytest.raises(RuntimeError, match="only on the active controller"):
        h.cluster.find_stale_broker(0)
    h.cluster.activate(50_000)
    assert h.cluster.find_stale_broker(50_000 + TIMEOUT - 1) is None
    assert h.cluster.find_stale_broker(50_000 + TIMEOUT) == 1
    assert h.cluster.session_metadata_offset(1) == -1


def test_touching_a_session_postpones_its_expiry(h: Harness) -> None:
    h.started(1)
    h.cluster.touch_session(1, 4000)
    assert h.cluster.find_stale_broker(TIMEOUT) is None
    assert h.cluster.find_stale_broker(4000 + TIMEOUT) == 1


# -- unregistration, replay, queries ---------------------------------------------------------------


def test_unregistering_moves_the_broker_out_first(h: Harness) -> None:
    epoch = h.started(4)
    h.replication.on_fenced[4] = (NoOpRecord(),)
    result = h.cluster.unregister_broker(4, replication=h.replication)
    assert result.records == (NoOpRecord(), UnregisterBrokerRecord(4, epoch))
    h.apply(result)
    assert not h.cluster.is_registered(4) and h.cluster.broker_epoch(4) is None
    with pytest.raises(BrokerIdNotRegisteredError, match="broker 4 is not registered"):
        h.cluster.unregister_broker(4, replication=h.replication)


def test_replay_rejects_changes_to_unknown_brokers_or_stale_epochs(h: Harness) -> None:
    with pytest.raises(MetadataReplayError, match="broker 1, which is not registered"):
        h.cluster.replay(BrokerRegistrationChangeRecord(1, 5, FenceChange.FENCE), 9)
    epoch = h.started(1)
    with pytest.raises(MetadataReplayError, match="broker epoch 12345, but its registration"):
        h.cluster.replay(UnregisterBrokerRecord(1, 12345), 99)
    assert h.cluster.broker_epoch(1) == epoch


def test_liveness_queries(h: Harness) -> None:
    checker: BrokerLiveness = h.cluster
    h.started(3, rack="b")
    h.started(1, rack="a")
    h.apply(h.register(2))
    assert checker.active_brokers() == [(1, "a"), (3, "b")]
    assert checker.is_registered(2) and not checker.is_active(2)
    assert not checker.in_controlled_shutdown(1)
    assert checker.broker_epoch(9) is None


def test_reads_at_a_snapshot_do_not_see_later_registrations(h: Harness) -> None:
    h.started(1)
    h.registry.get_or_create_snapshot(h.next_offset - 1)
    stable = h.next_offset - 1
    h.apply(h.register(2))
    assert sorted(h.cluster.registrations()) == [1, 2]
    assert sorted(h.cluster.registrations(stable)) == [1]
    assert h.cluster.registration(2, stable) is None
    assert [r.broker_id for r in h.cluster.snapshot_records(stable)] == [1]


def test_writes_need_an_active_controller(h: Harness) -> None:
    h.cluster.deactivate()
    with pytest.raises(RuntimeError, match="only on the active controller"):
        h.register(1)


# -- fence notices ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepContextStub:
    """What a later step of a write is told (`StepContext`)."""

    now_ms: int
    next_write_offset: int


def test_each_fencing_and_unfencing_says_why(h: Harness) -> None:
    result = h.register(1)
    registered_at = h.apply(result)
    unfenced, _ = h.heartbeat(1, registered_at)
    assert unfenced.notices == (
        FenceNotice(
            1,
            registered_at,
            False,
            "its heartbeat asked to be unfenced, caught up with the metadata log (offset "
            f"{registered_at}, registered at {registered_at})",
        ),
    )
    asked, _ = h.heartbeat(1, 100, want_fence=True)
    assert asked.notices == (
        FenceNotice(1, registered_at, True, "its heartbeat asked to be fenced (want_fence)"),
    )
    again, _ = h.heartbeat(1, 100, want_fence=True)
    assert not again.notices  # already fenced: nothing written, nothing said
    epoch2 = h.started(2)
    shutdown, _ = h.heartbeat(2, 100, want_shut_down=True)
    assert [(n.broker_id, n.broker_epoch, n.fenced, n.reason) for n in shutdown.notices] == [
        (2, epoch2, True, "its controlled shutdown (heartbeat with want_shut_down)")
    ]
    epoch3 = h.started(3)
    stale = h.cluster.fence_stale_broker(3, replication=h.replication)
    assert stale.notices == (
        FenceNotice(
            3,
            epoch3,
            True,
            f"its session timed out (no heartbeat for broker.session.timeout.ms, {TIMEOUT} ms)",
        ),
    )
    assert "broker 3 fenced at broker epoch" in stale.notices[0].describe()


def test_a_stepped_fencing_says_why_with_its_fencing_record_only(h: Harness) -> None:
    h.cluster = ClusterControl(
        h.registry, cluster_id=CLUSTER, features=h.features, max_partition_changes_per_step=1
    )
    h.cluster.activate(h.now_ms)
    epoch = h.started(1)
    h.replication.on_fenced[1] = (NoOpRecord(), NoOpRecord())
    first, _ = h.heartbeat(1, 100, want_fence=True)
    assert first.then is not None and not first.notices
    h.replication.on_fenced[1] = ()
    last = first.then(StepContextStub(h.now_ms, h.next_offset))
    assert BrokerRegistrationChangeRecord(1, epoch, FenceChange.FENCE) in last.records
    assert [n.reason for n in last.notices] == ["its heartbeat asked to be fenced (want_fence)"]
