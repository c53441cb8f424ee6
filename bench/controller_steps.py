"""How long does a broker event hold the controller's loop? Stepped writes against whole ones.

A broker event on a cluster holding many partitions (issue #50: 10,000 partitions, RF 3, on
three brokers) makes a partition change for each partition the broker is in. In order, on one
cluster: a new incarnation of broker 1 registers (its predecessor, in every ISR, moved out);
broker 2 asks to be fenced; broker 3, now the last ISR member of every partition, shuts down in
a controlled way (every partition left without a leader); a new incarnation of broker 3
registers (nothing to move: it stays the last ISR member of leaderless partitions, the restart
case); it is unfenced (an election for every partition).

Each event is measured as the longest single call into the pure controller core, which is what
one turn of the node's event loop runs: the write itself, then every tick that runs its next
step (one tick per loop turn), and, on a standby, the replay of each committed batch. Calls are
timed in thread CPU time, which a machine shared with other work does not inflate; the loop
stall of a node is at least that.

Baseline, same run, same state: the controller with steps of unbounded size
(`max_partition_changes_per_step` past the partition count), which writes each event whole in
one call, as the controller did before stepping. Runs alternate between the two. Reported per
event: min/median/max of the longest call over the runs, and the ratio of the medians.

The core runs in memory (no Raft, no disk, no gRPC): the figures are the controller's own cost,
which a loaded machine multiplies.

    .venv/bin/python bench/controller_steps.py --partitions 10000 --runs 5
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from replog.quorum.controller.broker_heartbeat import BrokerHeartbeatRequest
from replog.quorum.controller.cluster_control import BrokerRegistrationRequest
from replog.quorum.controller.controller import QuorumController
from replog.quorum.controller.controller_config import ControllerConfig
from replog.quorum.controller.controller_result import MAX_PARTITION_CHANGES_PER_STEP
from replog.quorum.controller.replication_control import CreatableTopic
from replog.quorum.metadata.broker_lifecycle import SUPPORTED_FEATURES
from replog.quorum.metadata.log_batches import CommittedRecords
from replog.quorum.metadata.records import MetadataRecord

CLUSTER_ID = "bench-steps"
FEATURES = SUPPORTED_FEATURES  # what a real broker registers with
TOPIC_PARTITIONS = 10
EVENTS = ("register 1", "fence 2", "shut down 3", "register 3", "unfence 3")


@dataclass
class _Log:
    """Raft for two controllers: node 1 leads; `commit` delivers every batch to both."""

    batches: list[CommittedRecords] = field(default_factory=list)
    delivered: int = 0
    end: int = 0
    controllers: list[QuorumController] = field(default_factory=list)
    # The longest handle_commit call of the standby since the last reset, in seconds.
    standby_longest: float = 0.0

    def prepare_append(self, quorum_epoch: int, records: Sequence[MetadataRecord]) -> int:
        base, self.end = self.end, self.end + len(records)
        self.batches.append(CommittedRecords(base, self.end - 1, quorum_epoch, tuple(records)))
        return self.end - 1

    def resign(self, quorum_epoch: int) -> None:
        raise RuntimeError("the benchmark's controller gave up its leadership")

    def commit(self) -> None:
        active, standby = self.controllers
        while self.delivered < len(self.batches):
            batch = self.batches[self.delivered]
            self.delivered += 1
            active.handle_commit(batch)
            start = time.thread_time()
            standby.handle_commit(batch)
            self.standby_longest = max(self.standby_longest, time.thread_time() - start)


class Rig:
    """An active controller and a standby holding `partitions` partitions on brokers 1-3."""

    def __init__(self, partitions: int, step: int) -> None:
        self.log = _Log()
        self.now_ms = 0
        for node_id in (1, 2):
            config = ControllerConfig(
                node_id=node_id,
                cluster_id=CLUSTER_ID,
                max_partition_changes_per_step=step,
                auto_leader_rebalance_enable=False,
                broker_session_timeout_ms=3_600_000,  # no session expires during a run
                metadata_max_idle_interval_ms=0,
            )
            self.log.controllers.append(QuorumController(config, self.log, random.Random(node_id)))
        for controller in self.log.controllers:
            controller.handle_leader_change(1, 1, self.now_ms)
        self.log.commit()
        self.epochs = {b: self._register(b) for b in (1, 2, 3)}
        for broker_id in self.epochs:
            self.heartbeat(broker_id)
        topics = [
            CreatableTopic(f"t{i:06d}", TOPIC_PARTITIONS, 3)
            for i in range(partitions // TOPIC_PARTITIONS)
        ]
        for start in range(0, len(topics), 500):
            pending = self.active.create_topics(topics[start : start + 500], self.now_ms)
            self.settle()  # CreateTopics writes in steps, one a loop turn
            if not pending.done:
                raise RuntimeError("CreateTopics did not finish in the rig's loop turns")

    @property
    def active(self) -> QuorumController:
        return self.log.controllers[0]

    def _register(self, broker_id: int, previous_epoch: int = -1) -> int:
        request = BrokerRegistrationRequest(
            broker_id,
            CLUSTER_ID,
            uuid.uuid4(),
            features=FEATURES,
            previous_broker_epoch=previous_epoch,
        )
        pending = self.active.register_broker(request, self.now_ms)
        self.settle()
        return pending.result().broker_epoch

    def heartbeat(
        self, broker_id: int, *, want_fence: bool = False, shut_down: bool = False
    ) -> None:
        self.active.broker_heartbeat(
            BrokerHeartbeatRequest(
                broker_id,
                self.epochs[broker_id],
                self.log.end,
                want_fence=want_fence,
                want_shut_down=shut_down,
            ),
            self.now_ms,
        )
        self.settle()

    def settle(self) -> None:
        """Loop turns until no step is left: commit, then tick."""
        self.log.commit()
        while self.active.next_wake_ms(self.now_ms) == self.now_ms:
            self.now_ms += 10
            self.active.tick(self.now_ms)
            self.log.commit()


def longest_call(rig: Rig, event: Callable[[], None]) -> tuple[float, float]:
    """(active, standby): the longest single call of the event, in ms."""
    active = rig.active
    longest = 0.0
    original_tick = active.tick

    def timed_tick(now_ms: int) -> None:
        nonlocal longest
        start = time.thread_time()
        original_tick(now_ms)
        longest = max(longest, time.thread_time() - start)

    active.tick = timed_tick  # type: ignore[method-assign]
    original_write = active._run_write

    def timed_write(*args: object) -> None:
        nonlocal longest
        start = time.thread_time()
        original_write(*args)  # type: ignore[arg-type]
        longest = max(longest, time.thread_time() - start)

    active._run_write = timed_write  # type: ignore[method-assign]
    rig.log.standby_longest = 0.0
    try:
        event()
    finally:
        del active.tick, active._run_write
    return longest * 1000, rig.log.standby_longest * 1000


def run_events(partitions: int, step: int) -> dict[str, tuple[float, float]]:
    rig = Rig(partitions, step)
    gc.collect()
    results: dict[str, tuple[float, float]] = {}

    def register(broker_id: int) -> Callable[[], None]:
        def event() -> None:
            # The broker's previous process stopped cleanly: its successor takes over at once.
            rig.epochs[broker_id] = rig._register(broker_id, rig.epochs[broker_id])

        return event

    results["register 1"] = longest_call(rig, register(1))
    results["fence 2"] = longest_call(rig, lambda: rig.heartbeat(2, want_fence=True))
    results["shut down 3"] = longest_call(rig, lambda: rig.heartbeat(3, shut_down=True))
    results["register 3"] = longest_call(rig, register(3))
    results["unfence 3"] = longest_call(rig, lambda: rig.heartbeat(3))
    # A run that did not do the work measured nothing: broker 3 now leads every partition.
    led = rig.active.replication.partitions_led_by(3)
    if led != partitions // TOPIC_PARTITIONS * TOPIC_PARTITIONS:
        raise RuntimeError(f"broker 3 leads {led} partitions after its unfencing, not all")
    return results


def spread(values: list[float]) -> str:
    return f"{min(values):7.1f} {statistics.median(values):7.1f} {max(values):7.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--step", type=int, default=MAX_PARTITION_CHANGES_PER_STEP)
    args = parser.parse_args()
    whole = args.partitions * 10
    samples: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for _ in range(args.runs):
        for step in (whole, args.step):
            for name, figures in run_events(args.partitions, step).items():
                samples.setdefault((name, step), []).append(figures)
    print(
        f"{args.partitions} partitions, RF 3, 3 brokers; longest call in CPU ms over {args.runs} "
        f"runs (min median max); whole = one write, stepped = at most {args.step} changes a step"
    )
    print(f"{'event':20} {'':8} {'whole':>23} {'stepped':>23} {'ratio':>6}")
    for name in EVENTS:
        for index, role in enumerate(("active", "standby")):
            base = [s[index] for s in samples[(name, whole)]]
            new = [s[index] for s in samples[(name, args.step)]]
            ratio = statistics.median(new) / statistics.median(base)
            print(f"{name:20} {role:8} {spread(base):>23} {spread(new):>23} {ratio:6.2f}")


if __name__ == "__main__":
    main()
