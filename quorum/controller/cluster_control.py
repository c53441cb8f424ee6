"""ClusterControl: broker registrations, heartbeats, fencing, unfencing and controlled shutdown.

Registrations are durable (timeline state, replayed from RegisterBrokerRecord,
UnregisterBrokerRecord and BrokerRegistrationChangeRecord); heartbeat sessions are soft state
that only the active controller keeps (`broker_heartbeat`).

Rules (Kafka's ClusterControlManager and heartbeat handling, KIP-631):
- Registration: the cluster id must be this cluster's (INCONSISTENT_CLUSTER_ID). A broker id
  whose registration is unfenced with a live session cannot be taken by another incarnation
  (DUPLICATE_BROKER_REGISTRATION), unless the new one names that registration's broker epoch
  as its previous one (`succeeds_cleanly`). The broker must support every finalized feature
  (UNSUPPORTED_VERSION).
- A new incarnation's broker epoch is the offset its RegisterBrokerRecord lands at, and it
  starts fenced. If an earlier incarnation was still in ISRs or leading (it died without
  telling us), the records moving it out come first in the same write. Unless the new one
  names the live epoch as its previous one (a clean shutdown), the earlier one shut down
  uncleanly and leaves every ELR too (KIP-966, `handle_broker_unclean_shutdown`).
- Lifecycle writes are not atomic (as in Kafka): a broker in more ISRs than one batch holds
  must still be fenceable. The registration change that matters comes where a partial
  commit is harmless: a fence after the partition changes, an unfence before the elections;
  except for a session-expiry fencing (below).
- They are stepped (docs/controller.md#stepped-writes): at most
  `max_partition_changes_per_step` partition changes a step, the rest in later steps, one
  per loop turn. A fencing the broker asked for, unregistration and a new incarnation's
  registration end with their registration record in the step that moves the last
  partitions, and answer after it; each step checks the registration is still the one it
  started with. Unfencing and controlled shutdown answer after their first step; their
  remaining partition changes follow (`after`).
- A session-expiry fencing writes the fencing record with its first step. Its broker is dead
  or cut off: nobody asks again, so what is left of its moves must be found in the metadata
  by whichever controller is active, this one at its next tick or the next one after a
  failover (the fenced broker still leads, or shares an ISR: `QuorumController`'s sweep of
  fenced brokers). Until then a fenced broker may still be named in ISRs and as leader, for
  a few loop turns; fenced, it is inactive for every elector already, durably.
- A broker whose other evacuation (a fencing it asked for, a new incarnation's registration
  moving its predecessor out, unregistration) is half done is **evacuating**: soft state of
  the active controller. Each chain of steps holds its own mark (a token), taken by a step
  that leaves moves for later and given back through `_end_evacuation` only, by the chain's
  next step (which takes it again if moves are still left), by a refused step, or by the
  controller dropping the chain (`on_drop`: its batch refused). The broker is evacuating
  while any chain holds a mark, so a chain ending never frees what another is moving.
  `activate` and `deactivate` drop every mark: a new active controller derives what is left
  from the metadata (expired sessions, fenced brokers still named, leaderless partitions,
  brokers asking again). An evacuating broker is not active (`is_active`,
  `active_brokers`): no election makes it leader, no ISR takes it in and no placement picks
  it, so each step's moves stay moved (docs/controller.md#evacuating-brokers).
- One chain per broker: a fencing request or unregistration arriving while another chain
  evacuates the broker waits for it. A session-expiry fencing does not: it fences at once,
  beside any chain (all end with the broker fenced or gone). An unregistration whose
  registration was replaced by a new incarnation meanwhile fails with STALE_BROKER_EPOCH:
  the broker id is still registered.
- A retried registration of the same incarnation keeps its broker epoch and its flags.
- Every heartbeat, and every other broker request, names the broker epoch of the live
  registration, else STALE_BROKER_EPOCH.
- Heartbeats move brokers through `broker_heartbeat.next_broker_state`; a transition writes the
  records of the table below, and only then does the reply go out (after they commit):

  | to                    | records                                                           |
  | --------------------- | ----------------------------------------------------------------- |
  | FENCED, SHUTDOWN_NOW  | leaderships and ISR memberships moved away, then Fenced = 1        |
  | UNFENCED              | Fenced = -1, then leader elections for leaderless partitions      |
  | CONTROLLED_SHUTDOWN   | InControlledShutdown = 1, then leaderships and ISRs moved away    |

  Unfencing therefore needs both the broker's request (not `want_fence`) and its catch-up:
  its reported metadata offset at least the offset of its own registration record.
- A broker unheard of for `broker.session.timeout.ms` is fenced by the periodic check, one
  broker per write, the oldest expired session first.
- Every fencing and unfencing result carries a notice saying why (`fence_notices`): session
  timeout, controlled shutdown, the heartbeat asking to be fenced, or to be unfenced once
  caught up; a stepped fencing's notice comes with its last step, which writes the record.
- `replay` checks that a change or unregistration names a registered broker at its current
  broker epoch, else `MetadataReplayError` (the controller never writes such a record).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar
from uuid import UUID

from replog.errors import (
    BrokerIdNotRegisteredError,
    DuplicateBrokerRegistrationError,
    InconsistentClusterIdError,
    InvalidRequestError,
    KafkaError,
    StaleBrokerEpochError,
)
from replog.quorum.controller.broker_heartbeat import (
    BrokerHeartbeatReply,
    BrokerHeartbeatRequest,
    BrokerHeartbeatTracker,
    BrokerState,
    next_broker_state,
)
from replog.quorum.controller.controller_result import (
    MAX_PARTITION_CHANGES_PER_STEP,
    ControllerResult,
    Step,
    StepContext,
)
from replog.quorum.controller.feature_control import FeatureControl
from replog.quorum.controller.replication_hooks import ReplicationHooks
from replog.quorum.metadata.broker_registration import BrokerRegistration, registration_named_by
from replog.quorum.metadata.fence_notices import fence_notices
from replog.quorum.metadata.records import (
    BrokerRegistrationChangeRecord,
    Endpoint,
    FeatureRange,
    FenceChange,
    MetadataRecord,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)
from replog.timeline import SnapshotRegistry, TimelineHashMap

R = TypeVar("R")

BROKER_SESSION_TIMEOUT_MS_DEFAULT = 9000


@dataclass(frozen=True, slots=True)
class BrokerRegistrationRequest:
    broker_id: int
    cluster_id: str
    incarnation_id: UUID  # fresh for every start of the broker process
    endpoints: tuple[Endpoint, ...] = ()
    features: tuple[FeatureRange, ...] = ()
    rack: str | None = None
    # KIP-966: the broker epoch its previous run wrote into its clean-shutdown marker (-1: none)
    previous_broker_epoch: int = -1


@dataclass(frozen=True, slots=True)
class BrokerRegistrationReply:
    broker_epoch: int


def succeeds_cleanly(live_broker_epoch: int, previous_broker_epoch: int) -> bool:
    """Whether a registration naming `previous_broker_epoch` comes from the successor of the
    live registration, after its clean shutdown: the epoch is read from the clean-shutdown
    marker the live incarnation wrote into its own log dir as the last step of its broker
    role's stop (KIP-966), so that incarnation is done serving. Its session may still look
    live (a stopped cluster's last brokers cannot be fenced on their way out, and a new active
    controller gives every registration a fresh session): Kafka makes the successor wait that
    session out, up to broker.session.timeout.ms, where nothing is left to wait for. 0 and
    below name none: 0 is what an absent field reads as, and no broker epoch is 0 (offset 0
    holds the bootstrap records)."""
    return previous_broker_epoch > 0 and previous_broker_epoch == live_broker_epoch


class ClusterControl:
    """Registered brokers (timeline state) and their sessions (active controller only).

    Implements `BrokerLiveness` over the latest state."""

    __slots__ = (
        "_evacuating",
        "_features",
        "_max_changes",
        "_registration_offsets",
        "_registrations",
        "_revived",
        "_tracker",
        "cluster_id",
        "session_timeout_ms",
    )

    def __init__(
        self,
        registry: SnapshotRegistry,
        *,
        cluster_id: str,
        features: FeatureControl,
        session_timeout_ms: int = BROKER_SESSION_TIMEOUT_MS_DEFAULT,
        max_partition_changes_per_step: int = MAX_PARTITION_CHANGES_PER_STEP,
    ) -> None:
        if max_partition_changes_per_step <= 0:
            raise ValueError(
                "max_partition_changes_per_step must be positive, not "
                f"{max_partition_changes_per_step}"
            )
        self.cluster_id = cluster_id
        self.session_timeout_ms = session_timeout_ms
        self._max_changes = max_partition_changes_per_step
        self._features = features
        self._registrations: TimelineHashMap[int, BrokerRegistration] = TimelineHashMap(registry)
        # Where each broker's RegisterBrokerRecord landed: it is caught up once it has
        # applied that offset. Equal to the broker epoch, except for a retried registration
        # (same epoch, later record) or one loaded from a Raft snapshot (the snapshot's offset).
        self._registration_offsets: TimelineHashMap[int, int] = TimelineHashMap(registry)
        self._tracker: BrokerHeartbeatTracker | None = None
        # Soft state of the active controller (module docstring): for each broker with
        # evacuation steps still to run, the chains running them (one token each), so that a
        # chain ending clears its own mark and never another's.
        self._evacuating: dict[int, set[object]] = {}
        # Whether an evacuation was given up half way with its broker active again.
        self._revived = False

    # -- BrokerLiveness (latest state) -----------------------------------------------------------

    def is_registered(self, broker_id: int) -> bool:
        return broker_id in self._registrations.live

    def is_active(self, broker_id: int) -> bool:
        registration = self._registrations.live.get(broker_id)
        return (
            registration is not None
            and registration.is_active
            and broker_id not in self._evacuating
        )

    def broker_epoch(self, broker_id: int) -> int | None:
        registration = self._registrations.live.get(broker_id)
        return None if registration is None else registration.broker_epoch

    def in_controlled_shutdown(self, broker_id: int) -> bool:
        registration = self._registrations.live.get(broker_id)
        return registration is not None and registration.in_controlled_shutdown

    def is_fenced(self, broker_id: int) -> bool:
        registration = self._registrations.live.get(broker_id)
        return registration is not None and registration.fenced

    def active_brokers(self) -> list[tuple[int, str | None]]:
        return sorted(
            (registration.broker_id, registration.rack)
            for registration in self._registrations.live.values()
            if registration.is_active and registration.broker_id not in self._evacuating
        )

    # -- queries at an offset --------------------------------------------------------------------

    def registration(self, broker_id: int, offset: int | None = None) -> BrokerRegistration | None:
        """The broker's registration at `offset` (None: latest)."""
        return self._registrations.get(broker_id, offset=offset)

    def registrations(self, offset: int | None = None) -> dict[int, BrokerRegistration]:
        """Every registration at `offset` (None: latest), by broker id."""
        return self._registrations.to_dict(offset)

    def registration_offset(self, broker_id: int, offset: int | None = None) -> int | None:
        """Where the broker's registration record landed, as of `offset` (None: latest)."""
        return self._registration_offsets.get(broker_id, offset=offset)

    def check_broker_epoch(self, broker_id: int, broker_epoch: int) -> BrokerRegistration:
        """The live registration of `broker_id`; STALE_BROKER_EPOCH unless it has
        `broker_epoch`."""
        registration = self._registrations.live.get(broker_id)
        if registration is None:
            raise StaleBrokerEpochError(
                f"broker {broker_id} (broker epoch {broker_epoch}) is not registered"
            )
        if registration.broker_epoch != broker_epoch:
            raise StaleBrokerEpochError(
                f"broker {broker_id} sent broker epoch {broker_epoch}, but its registration has "
                f"broker epoch {registration.broker_epoch}"
            )
        return registration

    # -- sessions (active controller) ------------------------------------------------------------

    @property
    def is_tracking_sessions(self) -> bool:
        return self._tracker is not None

    def activate(self, now_ms: int) -> None:
        """Become the active controller's: every registered broker starts a fresh session, and
        no evacuation is under way (what a predecessor left half done is found again from the
        registrations and partitions: expired sessions, leaderless partitions, brokers asking
        again)."""
        self._evacuating.clear()
        self._revived = False
        tracker = BrokerHeartbeatTracker(self.session_timeout_ms)
        for broker_id in self._registrations.live:
            tracker.start(broker_id, now_ms)
        self._tracker = tracker

    def deactivate(self) -> None:
        """Forget every session and evacuation mark (they are soft state)."""
        self._tracker = None
        self._evacuating.clear()
        self._revived = False

    def is_evacuating(self, broker_id: int) -> bool:
        """Whether a stepped evacuation of the broker is half done (module docstring)."""
        return broker_id in self._evacuating

    def take_revived(self) -> bool:
        """Whether an evacuation was given up half way (a refused step, a dropped chain) with
        its broker active again since the last call: it may have left partitions leaderless
        that the broker can lead again, and the caller elects them."""
        revived, self._revived = self._revived, False
        return revived

    def session_metadata_offset(self, broker_id: int) -> int:
        """The metadata offset the broker last reported to this active controller; -1 if
        none."""
        return self._require_tracker().metadata_offset(broker_id)

    def touch_session(self, broker_id: int, now_ms: int) -> None:
        """The broker was heard from although its request was not processed (it expired in the
        shell's queue): keep an overloaded controller from fencing a healthy broker."""
        if broker_id in self._registrations.live:
            self._require_tracker().touch(broker_id, now_ms)

    def next_session_expiry_ms(self, now_ms: int) -> int | None:
        """When the next unfenced broker's session expires (None: no unfenced broker)."""
        oldest = self._oldest_session(now_ms)
        return None if oldest is None else oldest[0]

    def find_stale_broker(self, now_ms: int) -> int | None:
        """The unfenced broker whose session expired first, if any has at `now_ms`."""
        oldest = self._oldest_session(now_ms)
        if oldest is None or oldest[0] > now_ms:
            return None
        return oldest[1]

    def _oldest_session(self, now_ms: int) -> tuple[int, int] | None:
        """(expiry, broker id) of the unfenced broker whose session expires first."""
        tracker = self._require_tracker()
        return min(
            (
                (tracker.expiry_ms(registration.broker_id, now_ms), registration.broker_id)
                for registration in self._registrations.live.values()
                if not registration.fenced
            ),
            default=None,
        )

    # -- writes ----------------------------------------------------------------------------------

    def register_broker(
        self,
        request: BrokerRegistrationRequest,
        *,
        next_write_offset: int,
        now_ms: int,
        replication: ReplicationHooks,
    ) -> ControllerResult[BrokerRegistrationReply]:
        """Register a broker; its epoch is the offset its RegisterBrokerRecord lands at."""
        return self._register(
            request, next_write_offset=next_write_offset, now_ms=now_ms, replication=replication
        )

    def _register(
        self,
        request: BrokerRegistrationRequest,
        *,
        next_write_offset: int,
        now_ms: int,
        replication: ReplicationHooks,
        chain: object | None = None,
    ) -> ControllerResult[BrokerRegistrationReply]:
        """A step of `register_broker`; `chain` is its evacuation token from the second step
        on (None: the first)."""
        tracker = self._require_tracker()
        broker_id = request.broker_id
        if chain is not None:
            self._end_evacuation(broker_id, chain)  # taken again below if moves are left
        try:
            self._check_registration(request, now_ms)
        except KafkaError:
            if chain is not None:
                self._given_up(broker_id)  # refused half way: the old incarnation stays
            raise
        existing = self._registrations.live.get(broker_id)
        same_incarnation = (
            existing is not None and existing.incarnation_id == request.incarnation_id
        )
        records: list[MetadataRecord] = []
        if existing is not None and same_incarnation:
            # A retry: the broker may already hold this epoch, and its state goes on as it was.
            broker_epoch = existing.broker_epoch
            fenced = existing.fenced
            in_controlled_shutdown = existing.in_controlled_shutdown
            tracker.touch(broker_id, now_ms)
        else:
            # A new incarnation. Unless it names the live registration's epoch as the one its
            # predecessor's clean-shutdown marker holds, that predecessor stopped uncleanly and
            # its log may have lost what it had not synced: it leaves every ISR and ELR
            # (KIP-966). After a clean shutdown it only leaves ISRs and leaderships it still
            # held, as a fenced broker does. Either way before the new (fenced) registration.
            clean = existing is not None and succeeds_cleanly(
                existing.broker_epoch, request.previous_broker_epoch
            )
            evacuate = (
                replication.handle_broker_fenced
                if clean
                else replication.handle_broker_unclean_shutdown
            )
            changes = evacuate(broker_id, max_records=self._max_changes)
            if len(changes) >= self._max_changes:
                # More may remain: the registration goes on at the next turn, validated
                # again against the state these changes leave.
                chain = self._begin_evacuation(broker_id, chain)

                def next_step(ctx: StepContext) -> ControllerResult[BrokerRegistrationReply]:
                    return self._register(
                        request,
                        next_write_offset=ctx.next_write_offset,
                        now_ms=ctx.now_ms,
                        replication=replication,
                        chain=chain,
                    )

                return ControllerResult.partial(
                    changes, next_step, on_drop=self._dropper(broker_id, chain)
                )
            records.extend(changes)
            broker_epoch = next_write_offset + len(records)
            fenced = True
            in_controlled_shutdown = False
            tracker.start(broker_id, now_ms)
        records.append(
            RegisterBrokerRecord(
                broker_id=broker_id,
                incarnation_id=request.incarnation_id,
                broker_epoch=broker_epoch,
                endpoints=request.endpoints,
                features=request.features,
                rack=request.rack,
                fenced=fenced,
                in_controlled_shutdown=in_controlled_shutdown,
            )
        )
        # Not atomic: a broker leading more partitions than a batch holds must still be able
        # to re-register. Batches are contiguous, so the epoch is right however they split.
        return ControllerResult.of(records, BrokerRegistrationReply(broker_epoch))

    def _check_registration(self, request: BrokerRegistrationRequest, now_ms: int) -> None:
        """Refuse a registration this cluster cannot take (module docstring)."""
        tracker = self._require_tracker()
        broker_id = request.broker_id
        if request.cluster_id != self.cluster_id:
            raise InconsistentClusterIdError(
                f"broker {broker_id} belongs to cluster {request.cluster_id!r}, but this is "
                f"cluster {self.cluster_id!r}"
            )
        if broker_id < 0:
            raise InvalidRequestError(f"broker id {broker_id} is negative")
        existing = self._registrations.live.get(broker_id)
        same_incarnation = (
            existing is not None and existing.incarnation_id == request.incarnation_id
        )
        if (
            existing is not None
            and not same_incarnation
            and not existing.fenced
            and tracker.is_live(broker_id, now_ms)
            and not succeeds_cleanly(existing.broker_epoch, request.previous_broker_epoch)
        ):
            raise DuplicateBrokerRegistrationError(
                f"broker {broker_id} is already registered by incarnation "
                f"{existing.incarnation_id} with a live session; incarnation "
                f"{request.incarnation_id} must wait for that session to expire"
            )
        self._features.check_broker_supports(broker_id, request.features)

    def process_heartbeat(
        self,
        request: BrokerHeartbeatRequest,
        *,
        now_ms: int,
        replication: ReplicationHooks,
    ) -> ControllerResult[BrokerHeartbeatReply]:
        """Touch the broker's session and move it to its next state (module docstring)."""
        tracker = self._require_tracker()
        broker_id = request.broker_id
        registration = self.check_broker_epoch(broker_id, request.broker_epoch)
        registration_offset = self._registration_offsets.live[broker_id]
        session = tracker.session(broker_id, now_ms)
        if session.controlled_shutdown_offset is not None and not registration.fenced:
            current = BrokerState.CONTROLLED_SHUTDOWN
        elif registration.fenced:
            current = BrokerState.FENCED
        else:
            current = BrokerState.UNFENCED
        asks_to_leave = request.want_shut_down and not request.want_fence
        needs_leaderships = current is BrokerState.CONTROLLED_SHUTDOWN or (
            current is BrokerState.UNFENCED and asks_to_leave
        )
        has_leaderships = needs_leaderships and replication.has_leaderships(broker_id)
        lowest_active_offset = (
            self._lowest_active_offset(tracker)
            if current is BrokerState.CONTROLLED_SHUTDOWN and not has_leaderships
            else -1
        )
        next_state = next_broker_state(
            current,
            request,
            registration_offset=registration_offset,
            has_leaderships=has_leaderships,
            controlled_shutdown_offset=session.controlled_shutdown_offset,
            lowest_active_offset=lowest_active_offset,
            flagged_in_controlled_shutdown=registration.in_controlled_shutdown,
        )
        tracker.touch(broker_id, now_ms, request.current_metadata_offset)
        reply = BrokerHeartbeatReply(
            is_caught_up=request.current_metadata_offset >= registration_offset,
            is_fenced=next_state.fenced,
            in_controlled_shutdown=next_state is BrokerState.CONTROLLED_SHUTDOWN,
            should_shut_down=next_state is BrokerState.SHUTDOWN_NOW,
        )
        if next_state is current:
            return ControllerResult.of((), reply)
        if next_state.fenced:
            tracker.end_controlled_shutdown(broker_id)
            if next_state is BrokerState.SHUTDOWN_NOW:
                reason = "its controlled shutdown (heartbeat with want_shut_down)"
            else:
                reason = "its heartbeat asked to be fenced (want_fence)"
            # The reply waits for the last step, which fences.
            return self._evacuate(
                broker_id,
                registration.broker_epoch,
                replication,
                self._fence,
                reply,
                fence_reason=reason,
            )
        limit = self._max_changes
        if next_state is BrokerState.UNFENCED:
            elections = replication.handle_broker_unfenced(broker_id, max_records=limit)
            unfence = self._change(registration, fenced=FenceChange.UNFENCE)
            reason = (
                "its heartbeat asked to be unfenced, caught up with the metadata log (offset "
                f"{request.current_metadata_offset}, registered at {registration_offset})"
            )
            # The elections left over go on without the broker waiting for them.
            return ControllerResult.of(
                [unfence, *elections.records],
                reply,
                after=elections.then,
                notices=fence_notices([unfence], reason),
            )
        assert next_state is BrokerState.CONTROLLED_SHUTDOWN, next_state
        records: list[MetadataRecord] = []
        if not registration.in_controlled_shutdown:
            records.append(self._change(registration, in_controlled_shutdown=True))
        changes = replication.handle_controlled_shutdown(broker_id, max_records=limit)
        records.extend(changes)

        def remember_shutdown_offset(offset: int) -> None:
            # The broker may stop once every active broker has applied this offset (the last
            # step's, as the steps go on: it leads something until then).
            session.controlled_shutdown_offset = offset

        after = None
        if len(changes) >= limit:
            epoch = registration.broker_epoch
            after = self._shutdown_step(epoch, broker_id, replication, remember_shutdown_offset)
        return ControllerResult.of(
            records, reply, on_batch_end=remember_shutdown_offset, after=after
        )

    def fence_stale_broker(
        self, broker_id: int, *, replication: ReplicationHooks
    ) -> ControllerResult[None]:
        """Fence a broker whose session expired (the periodic check): the fencing record with
        the first `max_partition_changes_per_step` moves of its leaderships and ISR
        memberships. The moves left, if any, are the controller's sweep of fenced brokers
        (`ReplicationControl.move_off_fenced_brokers`), which a new active controller finds
        again in the metadata: a dead broker is nobody's to ask again, and its fencing must
        survive a failover half way (module docstring)."""
        tracker = self._require_tracker()
        registration = self._registrations.live.get(broker_id)
        if registration is None or registration.fenced:
            return ControllerResult.of((), None)
        changes = replication.handle_broker_fenced(broker_id, max_records=self._max_changes)
        tracker.end_controlled_shutdown(broker_id)
        records: list[MetadataRecord] = list(changes)
        fence = self._change(registration, fenced=FenceChange.FENCE)
        records.append(fence)
        reason = (
            f"its session timed out (no heartbeat for broker.session.timeout.ms, "
            f"{tracker.session_timeout_ms} ms)"
        )
        return ControllerResult.of(records, None, notices=fence_notices([fence], reason))

    def unregister_broker(
        self, broker_id: int, *, replication: ReplicationHooks
    ) -> ControllerResult[None]:
        """Remove a broker's registration (an operator decommissioning it)."""
        tracker = self._require_tracker()
        registration = self._registrations.live.get(broker_id)
        if registration is None:
            raise BrokerIdNotRegisteredError(f"broker {broker_id} is not registered")

        def unregister(current: BrokerRegistration) -> list[MetadataRecord]:
            tracker.remove(broker_id)
            return [UnregisterBrokerRecord(broker_id, current.broker_epoch)]

        def replaced(current: BrokerRegistration) -> None:
            # Neither answer success for a broker id that is registered, nor remove the
            # incarnation that registered after this request began: say so, and let the
            # operator decide.
            raise StaleBrokerEpochError(
                f"broker {broker_id} was being unregistered at broker epoch "
                f"{registration.broker_epoch}, but incarnation {current.incarnation_id} "
                f"registered meanwhile (broker epoch {current.broker_epoch}) and stays "
                "registered; unregister it again to remove it"
            )

        return self._evacuate(
            broker_id,
            registration.broker_epoch,
            replication,
            unregister,
            None,
            if_replaced=replaced,
        )

    # -- replay and snapshots ------------------------------------------------------------------

    def replay(
        self,
        record: RegisterBrokerRecord | UnregisterBrokerRecord | BrokerRegistrationChangeRecord,
        offset: int,
    ) -> None:
        if isinstance(record, RegisterBrokerRecord):
            self._registrations[record.broker_id] = BrokerRegistration.from_record(record)
            self._registration_offsets[record.broker_id] = offset
        elif isinstance(record, UnregisterBrokerRecord):
            self._registered(record, offset)
            del self._registrations[record.broker_id]
            del self._registration_offsets[record.broker_id]
            if self._tracker is not None:
                self._tracker.remove(record.broker_id)
        else:
            current = self._registered(record, offset)
            self._registrations[record.broker_id] = current.merge(record)

    def snapshot_records(self, offset: int | None = None) -> list[RegisterBrokerRecord]:
        """Records that recreate the registrations at `offset`, by broker id."""
        registrations = self._registrations.to_dict(offset)
        return [registrations[broker_id].to_record() for broker_id in sorted(registrations)]

    # -- helpers ---------------------------------------------------------------------------------

    def _registered(
        self, record: UnregisterBrokerRecord | BrokerRegistrationChangeRecord, offset: int
    ) -> BrokerRegistration:
        return registration_named_by(record, self._registrations.live.get(record.broker_id), offset)

    def _evacuate(
        self,
        broker_id: int,
        broker_epoch: int,
        replication: ReplicationHooks,
        last_records: Callable[[BrokerRegistration], list[MetadataRecord]],
        response: R,
        *,
        if_replaced: Callable[[BrokerRegistration], R] | None = None,
        chain: object | None = None,
        fence_reason: str = "",
    ) -> ControllerResult[R]:
        """Move a broker (its registration at `broker_epoch`) out of every ISR and leadership,
        at most `max_partition_changes_per_step` changes a step, one step per loop turn; the
        step that moves the last ones ends with `last_records` of its registration (a fence,
        an unregistration), so it never holds while the broker is still in an ISR. If the
        registration is gone, there is nothing left to do; if another incarnation replaced it,
        `if_replaced` answers (else `response`). A fencing among `last_records` is noticed
        with `fence_reason`.

        While another chain (`chain` None: this is the first step) evacuates the broker, a new
        one waits for it (a step without records per loop turn), then goes on from what it
        left: one chain of moves per broker, however often the broker asks to be fenced. A
        session-expiry fencing holds no mark: it fences at once and leaves its moves to the
        sweep of fenced brokers."""

        def rest(chain: object | None) -> Step[R]:
            return lambda ctx: self._evacuate(
                broker_id,
                broker_epoch,
                replication,
                last_records,
                response,
                if_replaced=if_replaced,
                chain=chain,
                fence_reason=fence_reason,
            )

        if chain is None and self._evacuating.get(broker_id):
            return ControllerResult.partial((), rest(None))
        if chain is not None:
            self._end_evacuation(broker_id, chain)  # taken again if moves are left
        registration = self._registrations.live.get(broker_id)
        if registration is None:
            return ControllerResult.of((), response)
        if registration.broker_epoch != broker_epoch:
            if if_replaced is None:
                return ControllerResult.of((), response)
            return ControllerResult.of((), if_replaced(registration))
        changes = replication.handle_broker_fenced(broker_id, max_records=self._max_changes)
        if len(changes) >= self._max_changes:
            chain = self._begin_evacuation(broker_id, chain)  # no election undoes these moves
            return ControllerResult.partial(
                changes, rest(chain), on_drop=self._dropper(broker_id, chain)
            )
        last = last_records(registration)
        notices = fence_notices(last, fence_reason)
        return ControllerResult.of([*changes, *last], response, notices=notices)

    def _begin_evacuation(self, broker_id: int, chain: object | None) -> object:
        """Mark the broker evacuating for `chain` (None: a new chain); the chain's token."""
        token = object() if chain is None else chain
        self._evacuating.setdefault(broker_id, set()).add(token)
        return token

    def _end_evacuation(self, broker_id: int, chain: object) -> None:
        """The one way an evacuation's mark goes: its chain ended, was given up or dropped.
        The broker stays evacuating while another chain still holds it."""
        chains = self._evacuating.get(broker_id)
        if chains is None:
            return
        chains.discard(chain)
        if not chains:
            del self._evacuating[broker_id]

    def _dropper(self, broker_id: int, chain: object) -> Callable[[], None]:
        """What ends `chain` if the controller drops it (its step's batch refused)."""

        def drop() -> None:
            self._end_evacuation(broker_id, chain)
            self._given_up(broker_id)

        return drop

    def _given_up(self, broker_id: int) -> None:
        """An evacuation of the broker stopped half way: if the broker is active again, the
        partitions its first steps left leaderless may be led by it again, and the next
        `take_revived` says so."""
        if self.is_active(broker_id):
            self._revived = True

    def _fence(self, registration: BrokerRegistration) -> list[MetadataRecord]:
        """The fencing record, last in a fencing write (none if already fenced)."""
        if registration.fenced:
            return []
        return [self._change(registration, fenced=FenceChange.FENCE)]

    def _shutdown_step(
        self,
        broker_epoch: int,
        broker_id: int,
        replication: ReplicationHooks,
        on_batch_end: Callable[[int], None],
    ) -> Step[None]:
        """The rest of a controlled shutdown's moves, a step per loop turn, while the broker is
        still that registration, unfenced and in controlled shutdown."""

        def step(ctx: object) -> ControllerResult[None]:
            registration = self._registrations.live.get(broker_id)
            if (
                registration is None
                or registration.broker_epoch != broker_epoch
                or registration.fenced
                or not registration.in_controlled_shutdown
            ):
                return ControllerResult.of((), None)
            changes = replication.handle_controlled_shutdown(
                broker_id, max_records=self._max_changes
            )
            if len(changes) >= self._max_changes:
                rest = self._shutdown_step(broker_epoch, broker_id, replication, on_batch_end)
                return ControllerResult.partial(changes, rest, on_batch_end=on_batch_end)
            return ControllerResult.of(changes, None, on_batch_end=on_batch_end)

        return step

    @staticmethod
    def _change(
        registration: BrokerRegistration,
        *,
        fenced: FenceChange = FenceChange.NONE,
        in_controlled_shutdown: bool = False,
    ) -> BrokerRegistrationChangeRecord:
        return BrokerRegistrationChangeRecord(
            broker_id=registration.broker_id,
            broker_epoch=registration.broker_epoch,
            fenced=fenced,
            in_controlled_shutdown=in_controlled_shutdown,
        )

    def _lowest_active_offset(self, tracker: BrokerHeartbeatTracker) -> int:
        """The lowest metadata offset reported by an active broker (-1 if one has not
        reported in this session); no active broker at all: nothing to wait for."""
        offsets = [
            tracker.metadata_offset(registration.broker_id)
            for registration in self._registrations.live.values()
            if registration.is_active
        ]
        return min(offsets, default=_NO_ACTIVE_BROKER_OFFSET)

    def _require_tracker(self) -> BrokerHeartbeatTracker:
        if self._tracker is None:
            raise RuntimeError("broker sessions exist only on the active controller")
        return self._tracker


# With no active broker, nobody has to catch up before a controlled shutdown completes.
_NO_ACTIVE_BROKER_OFFSET = 2**63 - 1
