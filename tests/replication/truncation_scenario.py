"""Replicas' logs as leader epochs per offset, driven by text commands, for the truncation
scripts in testdata/truncation_*.txt: KIP-101 and KIP-279 (docs/design/replication.md#scenarios
S1, S2, S3, S6).

Each broker holds a log (the leader epoch of every offset, one record each), its leader-epoch
cache (epoch, start offset) entries, a flushed offset and a high watermark (set by `hw`; a
leader's does not advance here, a follower's follows its leader's after each fetch). A fetch
runs the pure decisions the real broker runs: the leader's diverging-epoch check
(`fetch_rules`) against its cache's end offset for the follower's last epoch, and the
follower's truncation (its `PartitionCore`'s `DivergingEpochAnswered`, over
`follower_truncation`), one round per fetch. The cache's lookup is modelled here on Kafka's
`LeaderEpochFileCache.endOffsetFor` (replog's is in replog/storage, `leader_epoch_cache.py`).

Commands:
    log B epochs=E,E,... [flushed=N]
                                  B's log: offset i holds a record of leader epoch E_i,
                                  durable below N (default: all)
    lead B epoch=E                B leads epoch E: its cache records E at its LEO
    append B [n=1]                the leader B appends n records at its latest epoch
    flush B / crash B             make everything durable / lose what was not
    hw B N                        B's checkpointed high watermark
    fetch F from=L                one Fetch of follower F from leader L
    sync F from=L                 fetches until F's log equals L's
    start F                       F becomes a follower: where it starts fetching (KIP-101)
    logs                          every log, its cache and HW

`sync` fails the script unless the follower's log becomes the leader's within a bounded number
of fetches (convergence: one truncation round per divergent epoch).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID

from replog.errors import KafkaError
from replog.replication.fetch_rules import diverging_epoch
from replog.replication.follower_truncation import (
    UNDEFINED_END_OFFSET,
    UNDEFINED_LEADER_EPOCH,
    initial_fetch_offset,
)
from replog.replication.partition_core import PartitionCore
from replog.replication.partition_effects import RestartLogAt, TruncateTo
from replog.replication.partition_events import DivergingEpochAnswered
from replog.replication.producer_state import ProducerStateTable
from tests.scenario_scripts import dispatch

SYNC_ROUNDS_MAX = 20


@dataclass
class Replica:
    epochs: list[int] = field(default_factory=list)  # the leader epoch of each offset
    cache: list[tuple[int, int]] = field(default_factory=list)  # (epoch, start offset)
    flushed: int = 0
    hw: int = 0
    # The replica's decisions (its follower side here), as the broker's `Partition` holds them.
    core: PartitionCore = field(
        default_factory=lambda: PartitionCore(
            topic="t",
            topic_id=UUID(int=0x101),
            partition=0,
            local_broker_id=0,
            producers=ProducerStateTable("t-0"),
            alter_partition_retry_ms=1000,
        )
    )

    @property
    def leo(self) -> int:
        return len(self.epochs)

    @property
    def latest_epoch(self) -> int:
        return self.cache[-1][0] if self.cache else UNDEFINED_LEADER_EPOCH

    def assign(self, epoch: int, start: int) -> None:
        """`LeaderEpochCache.assign`: entries at or above either are replaced."""
        if self.cache and self.cache[-1][0] == epoch and self.cache[-1][1] <= start:
            return
        while self.cache and (self.cache[-1][0] >= epoch or self.cache[-1][1] >= start):
            self.cache.pop()
        self.cache.append((epoch, start))

    def end_offset_for_follower(self, epoch: int) -> tuple[int, int] | None:
        """The follower's lookup: None while its log tracks no epochs."""
        return self.end_offset_for(epoch) if self.cache else None

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        """Kafka's `endOffsetFor(epoch, LEO)`."""
        if epoch == UNDEFINED_LEADER_EPOCH:
            return UNDEFINED_LEADER_EPOCH, UNDEFINED_END_OFFSET
        if epoch == self.latest_epoch:
            return epoch, self.leo
        higher = [i for i, (e, _) in enumerate(self.cache) if e > epoch]
        if not higher:
            return UNDEFINED_LEADER_EPOCH, UNDEFINED_END_OFFSET
        index = higher[0]
        end = self.cache[index][1]
        return (epoch if index == 0 else self.cache[index - 1][0]), end

    def append(self, epochs: list[int]) -> None:
        for epoch in epochs:
            self.assign(epoch, self.leo)
            self.epochs.append(epoch)

    def truncate_to(self, offset: int) -> None:
        del self.epochs[offset:]
        self.cache = [(e, s) for e, s in self.cache if s < offset]
        self.flushed = min(self.flushed, offset)
        self.hw = min(self.hw, offset)


def _ranges(epochs: list[int]) -> str:
    """e.g. ``e1[0,2) e3[2,3)``: runs of one leader epoch."""
    runs: list[str] = []
    start = 0
    for offset in range(1, len(epochs) + 1):
        if offset == len(epochs) or epochs[offset] != epochs[start]:
            runs.append(f"e{epochs[start]}[{start},{offset})")
            start = offset
    return " ".join(runs) or "empty"


@dataclass
class TruncationScenario:
    replicas: dict[int, Replica] = field(default_factory=dict)
    out: list[str] = field(default_factory=list)

    def say(self, line: str) -> None:
        self.out.append(line)

    def replica(self, text: str) -> Replica:
        return self.replicas.setdefault(int(text), Replica())

    def one_fetch(self, follower_id: int, leader_id: int) -> bool:
        """One Fetch and its handling; whether the follower's log changed."""
        follower, leader = self.replicas[follower_id], self.replicas[leader_id]
        last_epoch = follower.latest_epoch
        self.say(f"{follower_id}->{leader_id} Fetch offset={follower.leo} last_epoch={last_epoch}")
        try:
            diverging = diverging_epoch(
                f"t-0 on {leader_id}",
                fetch_offset=follower.leo,
                last_fetched_epoch=last_epoch,
                leader_end_offset_for_last_epoch=leader.end_offset_for(last_epoch),
                log_start_offset=0,
            )
        except KafkaError as error:
            self.say(f"  {leader_id}->{follower_id} {error.error_name}")
            return False
        if diverging is not None:
            self.say(
                f"  {leader_id}->{follower_id} diverging epoch={diverging.leader_epoch} "
                f"end={diverging.end_offset}"
            )
            (decided,) = follower.core.step(
                DivergingEpochAnswered(
                    diverging.leader_epoch,
                    diverging.end_offset,
                    0,  # the leader's log start: every log here starts at 0
                    follower.leo,
                    follower.hw,
                    follower.end_offset_for_follower,
                ),
                0,
            )
            before = follower.leo
            if isinstance(decided, RestartLogAt):
                self.say(f"  {follower_id} restarts its log at {decided.offset}")
                follower.truncate_to(0)
                follower.cache = []
                return before > 0
            assert isinstance(decided, TruncateTo)
            again = "" if decided.completed else ", asks again"
            self.say(f"  {follower_id} truncates to {decided.offset}{again}")
            follower.truncate_to(decided.offset)
            return decided.offset < before
        copied = leader.epochs[follower.leo :]
        if copied:
            self.say(f"  {leader_id}->{follower_id} records [{follower.leo},{leader.leo})")
        follower.append(copied)
        follower.hw = max(0, min(leader.hw, follower.leo))
        return bool(copied)

    # --- commands --------------------------------------------------------------------------

    def cmd_log(self, args: list[str], options: dict[str, str]) -> None:
        replica = self.replicas[int(args[0])] = Replica()
        replica.append([int(e) for e in options.get("epochs", "").split(",") if e])
        replica.flushed = int(options.get("flushed", str(replica.leo)))

    def cmd_lead(self, args: list[str], options: dict[str, str]) -> None:
        replica = self.replica(args[0])
        replica.assign(int(options["epoch"]), replica.leo)
        self.say(f"{args[0]} leads epoch {options['epoch']} from offset {replica.leo}")

    def cmd_append(self, args: list[str], options: dict[str, str]) -> None:
        replica = self.replica(args[0])
        start = replica.leo
        replica.append([replica.latest_epoch] * int(options.get("n", "1")))
        self.say(f"{args[0]} appends [{start},{replica.leo}) at epoch {replica.latest_epoch}")

    def cmd_flush(self, args: list[str], options: dict[str, str]) -> None:
        replica = self.replica(args[0])
        replica.flushed = replica.leo

    def cmd_crash(self, args: list[str], options: dict[str, str]) -> None:
        replica = self.replica(args[0])
        lost = replica.leo - replica.flushed
        replica.truncate_to(replica.flushed)
        self.say(f"{args[0]} lost {lost} unflushed records; log end offset {replica.leo}")

    def cmd_hw(self, args: list[str], options: dict[str, str]) -> None:
        self.replica(args[0]).hw = int(args[1])

    def cmd_start(self, args: list[str], options: dict[str, str]) -> None:
        replica = self.replica(args[0])
        start = initial_fetch_offset(
            log_end_offset=replica.leo,
            latest_leader_epoch=replica.latest_epoch if replica.cache else None,
            high_watermark=replica.hw,
        )
        if start < replica.leo:
            replica.truncate_to(start)
        self.say(f"{args[0]} starts fetching at {start} (hw {replica.hw})")

    def cmd_fetch(self, args: list[str], options: dict[str, str]) -> None:
        self.one_fetch(int(args[0]), int(options["from"]))

    def cmd_sync(self, args: list[str], options: dict[str, str]) -> None:
        follower_id, leader_id = int(args[0]), int(options["from"])
        for _ in range(SYNC_ROUNDS_MAX):
            self.one_fetch(follower_id, leader_id)
            if self.replicas[follower_id].epochs == self.replicas[leader_id].epochs:
                self.say(f"  {follower_id} has {leader_id}'s log")
                return
        raise AssertionError(f"{follower_id} did not converge on {leader_id}")

    def cmd_logs(self, args: list[str], options: dict[str, str]) -> None:
        for broker_id, replica in sorted(self.replicas.items()):
            cache = " ".join(f"{e}@{s}" for e, s in replica.cache) or "-"
            self.say(
                f"{broker_id}: {_ranges(replica.epochs)} cache={cache} hw={replica.hw} "
                f"flushed={replica.flushed}"
            )


def run_command(env: TruncationScenario, line: str) -> list[str]:
    return dispatch(env, line)
