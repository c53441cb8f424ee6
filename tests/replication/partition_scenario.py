"""One partition's leader core driven by text commands, for the scripts in testdata/*.txt.

The interpreter plays the shell around a `PartitionCore` (replog/replication/partition_core.py):
the leader's log (a log end offset and the producer table), the followers (each fetch names its
offset), the controller (it answers the AlterPartition in flight when told), the produce
purgatory (parked produces and DeleteRecords by name, re-checked whenever an effect wakes them)
and the clock.
Every command prints the effects the core returned, one per line, and what executing them
caused. After every command the invariants below are checked; a violation fails the script.

Commands (brokers are integers; the leader is broker 1):
    lead [replicas=1,2,3] [isr=..] [epoch=E] [pepoch=P] [min-isr=N] [lag=MS] [leo=N] [hw=N]
         [recovering]                       metadata making broker 1 leader (or updating it)
    metadata [leader=B] [isr=..] [replicas=..] [epoch=E] [pepoch=P]
                                            a new registration; another leader loses it
    produce NAME [acks=-1] [records=1] [pid=ID pepoch=E seq=S] [waiting=N max=M]
                                            one partition's produce entry
    fetch B [offset=N] [lso=N] [broker-epoch=E]
                                            follower B fetches (offset: the leader's LEO, as a
                                            follower that copied everything; lso: its log start)
    delete NAME offset=N [policy=P] [no-wait] [waiting=N max=M]
                                            one partition's DeleteRecords entry (-1: the HW)
    expire NAME                             a parked produce's or DeleteRecords' request times out
    answer ok|ERROR_NAME                    the controller answers the AlterPartition in flight
    collect                                 the AlterPartition sender collects what to send
    tick MS                                 the clock moves; due wake-ups fire
    isr-check                               the periodic ISR check
    fence B | unfence B | register B epoch=E
                                            broker registrations (eligibility)
    config min-isr=N                        a new min.insync.replicas
    status

Invariants: the HW never moves back while this broker leads and never passes the LEO; an
acks=-1 produce answered with success has its offsets on every member of the maximal ISR (as
their last fetches report); the committed ISR always holds the leader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID

from replog.error_codes import KAFKA_ERRORS
from replog.errors import KafkaError, error_for_code
from replog.quorum.metadata.image import frozen_mapping
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.quorum.metadata.records import LeaderRecoveryState
from replog.record import build_batch, iter_frames, read_header
from replog.replication.leader_state import (
    ANY_BROKER_EPOCH,
    IsrChange,
    PartitionReplicationConfig,
    ReplicaEligibility,
)
from replog.replication.messages import ACKS_ALL
from replog.replication.partition_core import Effects, PartitionCore
from replog.replication.partition_effects import (
    AdvanceHighWatermark,
    AnswerDuplicate,
    AnswerProduce,
    AppendToLog,
    AssignLeaderEpoch,
    CompleteDeleteRecords,
    CompleteParked,
    FetchNews,
    HandOverAlterPartition,
    MoveLogStart,
    ParkDeleteRecords,
    ParkProduce,
    PartitionEffect,
    Refuse,
    ScheduleWakeup,
    SendAlterPartition,
    WakeWaiters,
)
from replog.replication.partition_events import (
    AlterPartitionAnswered,
    AlterPartitionCollected,
    DeleteRecordsArrived,
    FollowerFetchArrived,
    ImageRefreshed,
    LeadershipChanged,
    LeadershipLost,
    LogAppended,
    LogStartMoved,
    ParkedDeleteRecordsExpired,
    ParkedDeleteRecordsWoken,
    ParkedProduceExpired,
    ParkedProduceWoken,
    PartitionEvent,
    ProduceArrived,
    TimerFired,
)
from replog.replication.producer_state import ProducerStateTable
from tests.scenario_scripts import dispatch

LEADER = 1
BROKERS = range(1, 10)
TOPIC_ID = UUID(int=0x79)
START_MS = 1_000_000  # far from 0, so a caught-up time of 0 is long stale
ERROR_CODES = {spec.name: spec.code for spec in KAFKA_ERRORS}


def _ids(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x)


def _list(ids: tuple[int, ...]) -> str:
    return "[" + ",".join(map(str, ids)) + "]"


def _error(error: KafkaError | None) -> str:
    return "ok" if error is None else error.error_name


@dataclass
class PartitionScenario:
    """The shell of one leader core (module docstring)."""

    now_ms: int = START_MS
    core: PartitionCore = field(
        default_factory=lambda: PartitionCore(
            topic="t",
            topic_id=TOPIC_ID,
            partition=0,
            local_broker_id=LEADER,
            producers=ProducerStateTable("t-0"),
            alter_partition_retry_ms=1000,
        )
    )
    leo: int = 0
    log_hw: int = 0
    log_start: int = 0
    # The controller's view: the registration it last published or committed.
    registration: PartitionRegistration | None = None
    config: PartitionReplicationConfig = field(default_factory=PartitionReplicationConfig)
    broker_epochs: dict[int, int] = field(default_factory=dict)
    fenced: set[int] = field(default_factory=set)
    parked: dict[str, int] = field(default_factory=dict)  # name -> required offset
    parked_deletes: dict[str, int] = field(default_factory=dict)  # name -> offset
    in_flight: IsrChange | None = None
    wakeups: list[int] = field(default_factory=list)
    fetched: dict[int, int] = field(default_factory=dict)  # follower -> its last fetch offset
    highest_hw: int = -1  # while this broker leads
    out: list[str] = field(default_factory=list)

    # --- plumbing ------------------------------------------------------------------------

    def say(self, line: str) -> None:
        self.out.append(line)

    def eligibility(self) -> ReplicaEligibility:
        """Brokers 1..9 are registered (any broker epoch unless `register` named one)."""
        epochs = {b: self.broker_epochs.get(b, ANY_BROKER_EPOCH) for b in BROKERS}
        return ReplicaEligibility(
            broker_epochs=frozen_mapping({b: e for b, e in epochs.items() if b not in self.fenced})
        )

    def step(self, event: PartitionEvent) -> Effects:
        effects = self.core.step(event, self.now_ms)
        for effect in effects:
            self.execute(effect)
        return effects

    def execute(self, effect: PartitionEffect, name: str = "") -> None:
        """Print `effect` and do what a shell does with it (the produce answers are the
        produce command's)."""
        kind = type(effect)
        if isinstance(effect, AdvanceHighWatermark):
            self.say(f"  hw {self.log_hw} -> {effect.high_watermark}")
            self.log_hw = effect.high_watermark
            self.recheck_parked()
            self.recheck_parked_deletes()
        elif isinstance(effect, WakeWaiters):
            named = [n for n in ("produce", "fetch", "delete") if getattr(effect, n)]
            self.say(f"  wake {' '.join(named)}")
            if effect.produce:
                self.recheck_parked()
            if effect.delete:
                self.recheck_parked_deletes()
        elif isinstance(effect, SendAlterPartition):
            change = effect.change
            if change is None:
                self.say("  nothing to send")
            elif change != self.in_flight:
                leader = self.core.leader
                committed = set(leader.isr) if leader is not None else set()
                what = (
                    "expand"
                    if change.is_expansion
                    else "shrink"
                    if set(change.new_isr) != committed
                    else "recovered"
                )
                self.say(
                    f"  send AlterPartition {what} isr={_list(change.new_isr)} "
                    f"epoch={change.leader_epoch} pepoch={change.partition_epoch}"
                )
                self.in_flight = change
        elif isinstance(effect, HandOverAlterPartition):
            change = effect.change
            self.say(
                f"  hand over isr={_list(change.new_isr)} epoch={change.leader_epoch} "
                f"pepoch={change.partition_epoch}"
            )
        elif kind is FetchNews:
            self.say("  fetch news")
        elif isinstance(effect, ScheduleWakeup):
            self.say(f"  wake-up in {effect.at_ms - self.now_ms} ms")
            self.wakeups.append(effect.at_ms)
        elif isinstance(effect, Refuse):
            self.say(f"  refuse {effect.error.error_name}")
        elif isinstance(effect, AssignLeaderEpoch):
            self.say(f"  epoch {effect.leader_epoch} starts at {effect.start_offset}")
        elif kind is AppendToLog:
            self.say("  append")
        elif isinstance(effect, AnswerDuplicate):
            batch = effect.batch
            self.say(f"  duplicate of offsets {batch.first_offset}..{batch.last_offset}")
        elif isinstance(effect, AnswerProduce):
            self.say(f"  answer {name} {_error(effect.error)}")
        elif isinstance(effect, ParkProduce):
            self.say(f"  park {name} until hw >= {effect.required_offset}")
            self.parked[name] = effect.required_offset
        elif isinstance(effect, MoveLogStart):
            self.say(f"  log start {self.log_start} -> {max(self.log_start, effect.offset)}")
        elif isinstance(effect, ParkDeleteRecords):
            self.say(f"  park {name} until low watermark >= {effect.offset}")
            self.parked_deletes[name] = effect.offset
        elif isinstance(effect, CompleteDeleteRecords):
            self.say(f"  done {name} {_error(effect.error)} low watermark {effect.low_watermark}")
        else:
            raise AssertionError(f"unexpected effect {effect!r}")

    def recheck_parked(self) -> None:
        for name, required in list(self.parked.items()):
            for effect in self.core.step(ParkedProduceWoken(required), self.now_ms):
                assert isinstance(effect, CompleteParked)
                del self.parked[name]
                self.say(f"  complete {name} {_error(effect.error)}")
                if effect.error is None:
                    self.check_replicated(name, required)

    def recheck_parked_deletes(self) -> None:
        leading = self.core.leader is not None
        for name, offset in list(self.parked_deletes.items()):
            woken = ParkedDeleteRecordsWoken(offset, self.log_start if leading else -1)
            for effect in self.core.step(woken, self.now_ms):
                del self.parked_deletes[name]
                self.execute(effect, name)

    def check_replicated(self, name: str, required: int) -> None:
        leader = self.core.leader
        assert leader is not None
        if len(leader.maximal_isr) < leader.effective_min_isr:
            raise AssertionError(
                f"{name} acknowledged with the ISR {list(leader.maximal_isr)} below the "
                f"effective min ISR {leader.effective_min_isr}"
            )
        for broker in leader.maximal_isr:
            if broker != LEADER and self.fetched.get(broker, -1) < required:
                raise AssertionError(
                    f"{name} acknowledged up to {required} but ISR member {broker} last "
                    f"fetched at {self.fetched.get(broker)}"
                )

    def check_invariants(self) -> None:
        leader = self.core.leader
        if leader is None:
            self.highest_hw = -1
            return
        hw = leader.high_watermark
        if hw < self.highest_hw:
            raise AssertionError(f"the HW moved back from {self.highest_hw} to {hw}")
        if hw > self.leo:
            raise AssertionError(f"the HW {hw} passed the LEO {self.leo}")
        if LEADER not in leader.isr:
            raise AssertionError(f"the ISR {leader.isr} lost the leader")
        self.highest_hw = hw

    def publish(self, registration: PartitionRegistration) -> None:
        self.registration = registration
        if registration.leader != LEADER:
            self.step(LeadershipLost())
            return
        self.step(
            LeadershipChanged(registration, self.leo, self.log_hw, self.config, self.eligibility())
        )

    # --- commands --------------------------------------------------------------------------

    def cmd_lead(self, args: list[str], options: dict[str, str]) -> None:
        replicas = _ids(options.get("replicas", "1,2,3"))
        self.config = PartitionReplicationConfig(
            min_insync_replicas=int(options.get("min-isr", "1")),
            replica_lag_time_ms_max=int(options.get("lag", "30000")),
        )
        if self.core.leader is None:
            self.leo = int(options.get("leo", "0"))
            self.log_hw = int(options.get("hw", "0"))
        recovering = "recovering" in args
        self.publish(
            PartitionRegistration(
                replicas=replicas,
                isr=_ids(options["isr"]) if "isr" in options else replicas,
                leader=LEADER,
                leader_epoch=int(options.get("epoch", "1")),
                partition_epoch=int(options.get("pepoch", "0")),
                leader_recovery_state=(
                    LeaderRecoveryState.RECOVERING if recovering else LeaderRecoveryState.RECOVERED
                ),
            )
        )

    def cmd_metadata(self, args: list[str], options: dict[str, str]) -> None:
        current = self.registration
        assert current is not None, "lead first"
        self.publish(
            PartitionRegistration(
                replicas=_ids(options["replicas"]) if "replicas" in options else current.replicas,
                isr=_ids(options["isr"]) if "isr" in options else current.isr,
                leader=int(options.get("leader", str(current.leader))),
                leader_epoch=int(options.get("epoch", str(current.leader_epoch))),
                partition_epoch=int(options.get("pepoch", str(current.partition_epoch + 1))),
                leader_recovery_state=LeaderRecoveryState.RECOVERED,
            )
        )

    def cmd_produce(self, args: list[str], options: dict[str, str]) -> None:
        name = args[0]
        acks = int(options.get("acks", str(ACKS_ALL)))
        count = int(options.get("records", "1"))
        batch_options = {}
        if "pid" in options:
            batch_options = {
                "producer_id": int(options["pid"]),
                "producer_epoch": int(options.get("pepoch", "0")),
                "base_sequence": int(options.get("seq", "0")),
            }
        records = build_batch(
            [(0, None, f"{name}-{i}".encode(), ()) for i in range(count)], **batch_options
        )
        event = ProduceArrived(
            acks, records, int(options.get("waiting", "0")), int(options.get("max", "1000"))
        )
        effects = self.core.step(event, self.now_ms)
        for effect in effects:
            self.execute(effect, name)
        if not any(type(e) is AppendToLog for e in effects):
            return
        # The shell's append: the batch stamped at the LEO, then the producer table.
        base = self.leo
        self.leo += count
        for position, _ in iter_frames(records):
            header = read_header(records, position)
            self.core.producers.update(header._replace(base_offset=base))
        leader = self.core.leader
        assert leader is not None
        for effect in self.core.step(LogAppended(acks, self.leo - 1, self.leo), self.now_ms):
            self.execute(effect, name)
            if isinstance(effect, AnswerProduce) and acks == ACKS_ALL and effect.error is None:
                self.check_replicated(name, self.leo)

    def cmd_fetch(self, args: list[str], options: dict[str, str]) -> None:
        replica = int(args[0])
        offset = int(options.get("offset", str(self.leo)))
        leader = self.core.leader
        if leader is not None:
            # The answer carries the HW from before this fetch's progress (KIP-101's lag).
            self.say(f"  answer hw={leader.high_watermark}")
        before = self.fetched.get(replica)
        self.fetched[replica] = offset  # what the invariant reads while effects execute
        effects = self.step(
            FollowerFetchArrived(
                replica,
                int(options.get("broker-epoch", "-1")),
                offset,
                int(options.get("lso", "0")),
                self.leo,
            )
        )
        if any(type(e) is Refuse for e in effects):
            if before is None:
                del self.fetched[replica]
            else:
                self.fetched[replica] = before

    def cmd_delete(self, args: list[str], options: dict[str, str]) -> None:
        name = args[0]
        event = DeleteRecordsArrived(
            int(options["offset"]),
            options.get("policy", "delete"),
            self.log_start,
            "no-wait" not in args,
            int(options.get("waiting", "0")),
            int(options.get("max", "1000")),
        )
        effects = self.core.step(event, self.now_ms)
        for effect in effects:
            self.execute(effect, name)
        move = effects[0]
        if not isinstance(move, MoveLogStart):
            return
        moved = move.offset > self.log_start
        self.log_start = max(self.log_start, move.offset)
        for effect in self.core.step(
            LogStartMoved(move.offset, moved, self.log_start), self.now_ms
        ):
            self.execute(effect, name)

    def cmd_expire(self, args: list[str], options: dict[str, str]) -> None:
        name = args[0]
        event: PartitionEvent
        if name in self.parked:
            event = ParkedProduceExpired(self.parked.pop(name))
        else:
            leading = self.core.leader is not None
            offset = self.parked_deletes.pop(name)
            event = ParkedDeleteRecordsExpired(offset, self.log_start if leading else -1)
        for effect in self.core.step(event, self.now_ms):
            if isinstance(effect, CompleteParked):
                self.say(f"  complete {name} {_error(effect.error)}")
            else:
                self.execute(effect, name)

    def cmd_answer(self, args: list[str], options: dict[str, str]) -> None:
        change = self.in_flight
        assert change is not None, "no AlterPartition in flight"
        registration = self.registration
        assert registration is not None
        self.in_flight = None
        if args[0] == "ok":
            partition_epoch = registration.partition_epoch + 1
            self.registration = PartitionRegistration(
                replicas=registration.replicas,
                isr=change.new_isr,
                leader=registration.leader,
                leader_epoch=registration.leader_epoch,
                partition_epoch=partition_epoch,
                leader_recovery_state=LeaderRecoveryState(change.leader_recovery_state),
            )
            answer = AlterPartitionAnswered(
                change, None, change.new_isr, change.leader_epoch, partition_epoch, self.leo
            )
        else:
            error = error_for_code(ERROR_CODES[args[0]])
            answer = AlterPartitionAnswered(change, error, (), -1, -1, self.leo)
        self.step(answer)

    def cmd_collect(self, args: list[str], options: dict[str, str]) -> None:
        self.step(AlterPartitionCollected())

    def cmd_tick(self, args: list[str], options: dict[str, str]) -> None:
        self.now_ms += int(args[0])
        due = [at for at in self.wakeups if at <= self.now_ms]
        self.wakeups = [at for at in self.wakeups if at > self.now_ms]
        for _ in due:
            self.step(TimerFired(self.leo))

    def cmd_isr_check(self, args: list[str], options: dict[str, str]) -> None:
        self.step(TimerFired(self.leo, check_isr=True))

    def _refresh(self) -> None:
        self.step(ImageRefreshed(self.eligibility(), self.config, self.leo))

    def cmd_fence(self, args: list[str], options: dict[str, str]) -> None:
        self.fenced.add(int(args[0]))
        self._refresh()

    def cmd_unfence(self, args: list[str], options: dict[str, str]) -> None:
        self.fenced.discard(int(args[0]))
        self._refresh()

    def cmd_register(self, args: list[str], options: dict[str, str]) -> None:
        self.broker_epochs[int(args[0])] = int(options["epoch"])
        self._refresh()

    def cmd_config(self, args: list[str], options: dict[str, str]) -> None:
        self.config = PartitionReplicationConfig(
            min_insync_replicas=int(options.get("min-isr", str(self.config.min_insync_replicas))),
            replica_lag_time_ms_max=int(
                options.get("lag", str(self.config.replica_lag_time_ms_max))
            ),
        )
        self._refresh()

    def cmd_status(self, args: list[str], options: dict[str, str]) -> None:
        leader = self.core.leader
        if leader is None:
            self.say(f"not leader leo={self.leo} parked={sorted(self.parked)}")
            return
        pending = leader.pending_isr_change
        self.say(
            f"leader epoch={leader.leader_epoch} pepoch={leader.partition_epoch} "
            f"isr={_list(leader.isr)} maximal={_list(leader.maximal_isr)} "
            f"leo={self.leo} hw={leader.high_watermark} "
            f"pending={_list(pending.new_isr) if pending else '-'} "
            f"parked={','.join(f'{n}@{r}' for n, r in self.parked.items()) or '-'} "
            f"log-start={self.log_start} "
            f"low-watermark={leader.low_watermark(self.log_start)}"
        )


def run_command(env: PartitionScenario, line: str) -> list[str]:
    return dispatch(env, line)
