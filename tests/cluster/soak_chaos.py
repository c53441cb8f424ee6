"""The faults of the whole-system soak (tests/cluster/test_cluster_soak.py): `Chaos` applies them
to a running loopback cluster, one at a time, on a schedule drawn from a seed, until a time
budget is spent.

The faults (FAULTS, with their weights): kill -9 of one node (down for a moment, or past the
broker session timeout, so that it is fenced and its leaderships move), of two nodes (no
quorum, no ISR of two), of all three; SIGSTOP of a node, often a partition's leader, past the
session timeout (it is fenced, and resumes believing it leads); SIGTERM (a controlled
shutdown) and a restart; a reassignment of a partition of the soak topic (shrunk to two
replicas, grown back to three, or reordered), also onto a node that is down; a preferred leader
election; DeleteRecords (of part of a partition, or now and then all of it), also followed at
once by a kill -9 of the partition's leader; and topic churn: a second topic deleted, re-created
and written, each generation read back alone.

Rules:
- The schedule is reproducible: the kinds of faults and the pauses between them are drawn from
  random.Random(seed); each fault's own choices (which node, how long, which partition) from a
  generator seeded by (seed, step), so a fault that reads the cluster's state, or skips a
  draw, does not shift the faults after it. The machine's timing is not reproducible, and the
  cluster's state a fault finds (who leads, the offsets) varies with it.
- The first round applies every kind once, in a seeded order, whatever the budget: a short
  run (CI's) still covers each kind. Later rounds draw kinds by weight until it is spent.
- A fault counts in `applied` only on evidence: a killed node's process gone and its restart
  answered, a stopped node seen stopped, an admin call answered without error. The soak's
  non-vacuity check reads `applied`: with the chaos loop stubbed out it is empty.
- A fault leaves the cluster running: what it stops or kills it continues or restarts before
  it returns, even when an admin call in between fails. A node found not running after a
  fault, that the fault did not leave down, crashed: that fails the soak.
- What fails the soak here (AssertionError): a node that does not restart, exit on SIGTERM or
  stop on SIGSTOP in time, a crash, a topic whose deletion never completes, a churned
  generation whose records are not exactly what was sent to it. An admin call refused in the
  turmoil (no controller for a moment, a reassignment already running) is not a failure: the
  fault is logged as refused and not counted.
- Every step is noted (`note`) with what it did, for the soak's failure output.
"""

from __future__ import annotations

import random
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from client_cluster import ClientCluster, produce_and_read_back
from cluster_helpers import LoopbackCluster, wait_for

from replog import Admin, TopicPartition
from replog.errors import ReplogError, UnknownTopicOrPartitionError

# kind -> weight (the soak script's mix, with its harsher variant's kinds folded in).
FAULTS = {
    "kill_one": 25,
    "sigstop": 20,
    "sigterm": 10,
    "reassign": 10,
    "delete_records": 10,
    "churn": 9,
    "elect": 8,
    "delete_records_kill_leader": 8,
    "reassign_to_down": 7,
    "kill_two": 5,
    "kill_all": 3,
}
# The kinds made of signals to node processes, which nothing refuses: the soak asserts each was
# applied at least once. (reassign_to_down also needs its reassignments accepted; in every run
# so far they were: the controller takes a replica on a registered broker that is down.)
PROCESS_FAULTS = (
    "kill_one",
    "kill_two",
    "kill_all",
    "sigstop",
    "sigterm",
    "reassign_to_down",
)
PAUSE_S = (1.0, 4.0)  # between two faults: the producer and consumer catch their breath
SHORT_DOWN_S = (0.2, 2.0)  # a node back before anyone notices (no fencing, a fetch or two lost)
SIGTERM_EXIT_S = 40  # a controlled shutdown gives up after the session timeout; ample margin
REASSIGNMENT_WAIT_S = 20  # how long a reassignment is waited for, when the schedule says so
DELETE_ALL_CHANCE = 0.25  # a DeleteRecords up to the high watermark
CHURN_TOPIC = "churn"
CHURN_RECORDS = 40
ADMIN_TIMEOUT_MS = 20_000


@dataclass
class Chaos:
    """Seeded faults on `clients`' cluster and on `topic` (module docstring)."""

    clients: ClientCluster
    admin: Admin
    topic: str
    partitions: int
    seed: int
    session_s: float  # broker.session.timeout.ms: what "past the session timeout" means
    note: Callable[[str], None]
    applied: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    # partition -> every offset DeleteRecords was asked to delete before, answered or not (a
    # request whose answer was lost may still have been applied)
    deleted_before: dict[int, list[int]] = field(default_factory=dict)
    churn_generation: int = 0

    @property
    def cluster(self) -> LoopbackCluster:
        return self.clients.loopback

    @property
    def nodes(self) -> list[int]:
        return sorted(self.cluster.addresses)

    # --- the schedule ---------------------------------------------------------------------------

    def run(self, budget_s: float) -> int:
        """Apply faults until `budget_s` is spent, every kind at least once; the step count."""
        schedule = random.Random(self.seed)
        first_round = sorted(FAULTS)
        schedule.shuffle(first_round)
        kinds, weights = list(FAULTS), list(FAULTS.values())
        end = time.monotonic() + budget_s
        step = 0
        while first_round or time.monotonic() < end:
            step += 1
            kind = first_round.pop() if first_round else schedule.choices(kinds, weights)[0]
            pause_s = schedule.uniform(*PAUSE_S)
            started = time.monotonic()
            self.note(f"step {step}: {kind}")
            try:
                getattr(self, kind)(random.Random(f"{self.seed}:{step}"))
            except ReplogError as exc:
                self.refused[kind] += 1
                self.note(f"  refused: {type(exc).__name__}: {exc}"[:400])
            self._assert_all_running(f"after step {step} ({kind})")
            self.note(f"  step {step} took {time.monotonic() - started:.1f} s")
            time.sleep(pause_s)
        return step

    def settle(self) -> None:
        """Undo what the faults left: every node continued and running, every partition of
        the topic grown back to a replica on each node."""
        for node in self.cluster.running():
            self.cluster.signal(node, signal.SIGCONT)  # harmless to a running process
        for node in sorted(set(self.nodes) - self.cluster.running()):
            self.cluster.restart(node)
        deadline = time.monotonic() + 30
        while True:
            try:
                short = self._grow_back()
            except ReplogError as exc:
                short = [f"{type(exc).__name__}: {exc}"]
            if not short:
                return
            assert time.monotonic() < deadline, f"could not grow back to 3 replicas: {short}"
            time.sleep(1)

    def _grow_back(self) -> list[str]:
        """Ask for a replica on every node for each partition short of one; what is still
        short (being reassigned, or refused)."""
        described = self.admin.describe_topics([self.topic], timeout_ms=ADMIN_TIMEOUT_MS)
        short = []
        for p in described[self.topic].partitions:
            if len(p.replicas) - len(p.adding_replicas) >= len(self.nodes):
                continue
            short.append(f"{self.topic}-{p.partition} on {list(p.replicas)}")
            if p.adding_replicas or p.removing_replicas:
                continue  # a reassignment runs; look again
            target = [*p.replicas, *(n for n in self.nodes if n not in p.replicas)]
            self._reassign(p.partition, target, "settle")
        return short

    def _assert_all_running(self, when: str) -> None:
        down = sorted(set(self.nodes) - self.cluster.running())
        assert not down, f"node(s) {down} not running {when}, though no fault left them down:\n" + (
            "\n".join(self._log_tail(node) for node in down)
        )

    def _log_tail(self, node: int, lines: int = 30) -> str:
        path = Path(self.cluster.layout.node(node).log_path)
        tail = path.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join([f"--- {path} (last lines)", *tail])

    # --- nodes ----------------------------------------------------------------------------------

    def _down_for(self, rng: random.Random) -> float:
        """A short absence, or one past the session timeout (the node is fenced)."""
        long_s = (self.session_s + 1, self.session_s + 8)
        return rng.uniform(*SHORT_DOWN_S) if rng.random() < 0.5 else rng.uniform(*long_s)

    def kill_one(self, rng: random.Random) -> None:
        node, down_s = rng.choice(self.nodes), self._down_for(rng)
        self.note(f"  kill -9 node {node}, down {down_s:.1f} s")
        self.cluster.kill(node)
        time.sleep(down_s)
        self.cluster.restart(node)
        self.applied["kill_one"] += 1

    def kill_two(self, rng: random.Random) -> None:
        pair = rng.sample(self.nodes, 2)
        gap_s, down_s = rng.uniform(0, 1.5), rng.uniform(1, 6)
        self.note(f"  kill -9 nodes {pair} {gap_s:.1f} s apart, down {down_s:.1f} s")
        self.cluster.kill(pair[0])
        time.sleep(gap_s)
        self.cluster.kill(pair[1])
        time.sleep(down_s)
        for node in pair:
            self.cluster.restart(node)
        self.applied["kill_two"] += 1

    def kill_all(self, rng: random.Random) -> None:
        kills, restarts = rng.sample(self.nodes, 3), rng.sample(self.nodes, 3)
        down_s = rng.uniform(1, 4)
        self.note(f"  kill -9 nodes {kills}, down {down_s:.1f} s, restarted in order {restarts}")
        for node in kills:
            self.cluster.kill(node)
            time.sleep(rng.uniform(0, 0.5))
        time.sleep(down_s)
        for node in restarts:
            self.cluster.restart(node)
        self.applied["kill_all"] += 1

    def sigstop(self, rng: random.Random) -> None:
        partition = rng.randrange(self.partitions)
        stop_s = self.session_s + rng.uniform(0.5, 3)
        by_leadership = rng.random() < 0.6
        node = rng.choice(self.nodes)
        if by_leadership:  # the interesting victim: a leader that wakes up fenced
            node = self._leader(partition) or node
        what = f"the leader of {self.topic}-{partition}" if by_leadership else "a node"
        self.note(f"  SIGSTOP node {node} ({what}) for {stop_s:.1f} s")
        pid = self.cluster.pid(node)
        self.cluster.signal(node, signal.SIGSTOP)
        try:
            wait_for(lambda: _process_state(pid) == "T", 5, f"node {node} to stop")
            time.sleep(stop_s)
        finally:
            self.cluster.signal(node, signal.SIGCONT)
        self.applied["sigstop"] += 1

    def sigterm(self, rng: random.Random) -> None:
        node, pause_s = rng.choice(self.nodes), rng.uniform(0.2, 3)
        started = time.monotonic()
        self.cluster.signal(node, signal.SIGTERM)
        wait_for(
            lambda: node not in self.cluster.running(),
            SIGTERM_EXIT_S,
            f"node {node} to exit after SIGTERM (a controlled shutdown)",
        )
        self.note(f"  SIGTERM node {node}: exited in {time.monotonic() - started:.1f} s")
        time.sleep(pause_s)
        self.cluster.restart(node)
        self.applied["sigterm"] += 1

    @contextmanager
    def _killed(self, node: int) -> Iterator[None]:
        """kill -9 `node` for the block; restarted at its end, whatever happened in it."""
        self.cluster.kill(node)
        try:
            yield
        finally:
            self.cluster.restart(node)

    # --- partitions -----------------------------------------------------------------------------

    def _tp(self, partition: int) -> TopicPartition:
        return TopicPartition(self.topic, partition)

    def _leader(self, partition: int) -> int | None:
        try:
            described = self.admin.describe_topics([self.topic], timeout_ms=ADMIN_TIMEOUT_MS)
        except ReplogError:
            return None
        return described[self.topic].partitions[partition].leader

    def _replicas(self, partition: int) -> tuple[list[int], bool]:
        """The partition's replicas, and whether a reassignment of it runs."""
        described = self.admin.describe_topics([self.topic], timeout_ms=ADMIN_TIMEOUT_MS)
        p = described[self.topic].partitions[partition]
        return list(p.replicas), bool(p.adding_replicas or p.removing_replicas)

    def _reassign(self, partition: int, target: list[int], kind: str) -> bool:
        """Ask for `target`; True if the controller took it."""
        (result,) = self.admin.alter_partition_reassignments(
            {self._tp(partition): target}, timeout_ms=ADMIN_TIMEOUT_MS
        )
        self.note(f"  reassign {self.topic}-{partition} to {target}: {result.error or 'accepted'}")
        if result.error is None:
            self.applied[kind] += 1
        return result.error is None

    def _wait_reassigned(self, partition: int) -> None:
        deadline = time.monotonic() + REASSIGNMENT_WAIT_S
        tp = self._tp(partition)
        while self.admin.list_partition_reassignments([tp], timeout_ms=ADMIN_TIMEOUT_MS):
            if time.monotonic() > deadline:
                self.note(f"  {tp.topic}-{tp.partition} still reassigning after the wait")
                return
            time.sleep(0.3)

    def reassign(self, rng: random.Random) -> None:
        partition = rng.randrange(self.partitions)
        replicas, moving = self._replicas(partition)
        if moving:
            self.note(f"  {self.topic}-{partition} is being reassigned already")
            return
        if len(replicas) < len(self.nodes):  # grow back
            target = replicas + [n for n in self.nodes if n not in replicas]
            rng.shuffle(target)
        elif rng.random() < 0.5:  # shrink
            dropped = rng.choice(replicas)
            target = [n for n in replicas if n != dropped]
        else:  # reorder: a new preferred leader
            target = replicas[1:] + replicas[:1]
        wait = rng.random() < 0.5
        if self._reassign(partition, target, "reassign") and wait:
            self._wait_reassigned(partition)

    def reassign_to_down(self, rng: random.Random) -> None:
        """A replica added on a node that is down: the reassignment waits for it to return."""
        partition = rng.randrange(self.partitions)
        down_s = rng.uniform(1, 6)
        replicas, moving = self._replicas(partition)
        if moving:
            self.note(f"  {self.topic}-{partition} is being reassigned already")
            return
        if len(replicas) == len(self.nodes):  # make room for the node first
            victim = rng.choice(replicas)
            replicas = [n for n in replicas if n != victim]
            if not self._reassign(partition, replicas, "reassign"):
                return
            self._wait_reassigned(partition)
        else:
            victim = next(n for n in self.nodes if n not in replicas)
        target = [*replicas, victim]
        rng.shuffle(target)
        self.note(f"  kill -9 node {victim}, reassign onto it while down {down_s:.1f} s")
        with self._killed(victim):
            self._reassign(partition, target, "reassign_to_down")
            time.sleep(down_s)

    def elect(self, rng: random.Random) -> None:
        results = self.admin.elect_leaders("preferred", None, timeout_ms=ADMIN_TIMEOUT_MS)
        moved = [f"{r.topic_partition.topic}-{r.topic_partition.partition}" for r in results]
        moved = [name for name, r in zip(moved, results, strict=True) if r.error is None]
        self.note(f"  preferred election: leaders moved in {moved or 'none'}")
        if moved:
            self.applied["elect"] += 1

    # --- records and topics ---------------------------------------------------------------------

    def _delete_some(self, rng: random.Random, partition: int, share: float) -> bool:
        """DeleteRecords of up to `share` of what the partition holds, or now and then of all
        of it (past the consumer group's position: it must move to the new log start, and
        only there); True if answered."""
        everything = rng.random() < DELETE_ALL_CHANCE
        tp = self._tp(partition)
        (start,) = self.admin.list_offsets({tp: -2}, timeout_ms=ADMIN_TIMEOUT_MS).values()
        (end,) = self.admin.list_offsets({tp: -1}, timeout_ms=ADMIN_TIMEOUT_MS).values()
        assert start is not None and end is not None, f"{tp}: no log start or end offset"
        if end.offset <= start.offset:
            self.note(f"  {self.topic}-{partition} holds nothing to delete")
            return False
        some = rng.randint(start.offset, start.offset + int((end.offset - start.offset) * share))
        before = end.offset if everything else some
        self.deleted_before.setdefault(partition, []).append(before)
        answer = self.admin.delete_records_each({tp: before}, timeout_ms=ADMIN_TIMEOUT_MS)[tp]
        self.note(
            f"  delete {self.topic}-{partition} before {before} (log {start.offset}.."
            f"{end.offset}): {answer!r}"
        )
        return isinstance(answer, int)

    def delete_records(self, rng: random.Random) -> None:
        if self._delete_some(rng, rng.randrange(self.partitions), 1 / 3):
            self.applied["delete_records"] += 1

    def delete_records_kill_leader(self, rng: random.Random) -> None:
        """DeleteRecords, then at once kill -9 the leader: the new log start must survive."""
        partition = rng.randrange(self.partitions)
        pause_s, down_s = rng.uniform(0, 0.5), self._down_for(rng)
        leader = self._leader(partition)
        if leader is None:
            self.note(f"  {self.topic}-{partition} has no leader now")
            return
        deleted = self._delete_some(rng, partition, 1 / 2)
        time.sleep(pause_s)
        self.note(f"  kill -9 leader {leader}, down {down_s:.1f} s")
        with self._killed(leader):
            time.sleep(down_s)
        if deleted:
            self.applied["delete_records_kill_leader"] += 1

    def churn(self, rng: random.Random) -> None:
        """Delete the churn topic (if any), re-create it, and write and read back a generation
        of records: exactly them, nothing of the generation before."""
        if self.churn_generation:
            (deleted,) = self.admin.delete_topics([CHURN_TOPIC], timeout_ms=ADMIN_TIMEOUT_MS)
            # Unknown: deleted by an earlier step whose wait below was cut short.
            if deleted.error is not None and not isinstance(
                deleted.error, UnknownTopicOrPartitionError
            ):
                self.note(f"  delete of {CHURN_TOPIC} refused: {deleted.error!r}")
                self.refused["churn"] += 1
                return
            deadline = time.monotonic() + 30
            while CHURN_TOPIC in self.admin.list_topics(timeout_ms=ADMIN_TIMEOUT_MS):
                assert time.monotonic() < deadline, (
                    f"{CHURN_TOPIC} (generation {self.churn_generation}) still listed 30 s "
                    "after its deletion"
                )
                time.sleep(0.2)
            time.sleep(rng.uniform(0, 2))
        self.churn_generation += 1
        self.clients.create_topic(CHURN_TOPIC, 1, 3, {"min.insync.replicas": "2"})
        values = [f"g{self.churn_generation}-{i}".encode() for i in range(CHURN_RECORDS)]
        try:
            produce_and_read_back(self.clients.bootstrap, CHURN_TOPIC, values)
        except AssertionError as exc:
            exc.add_note(
                f"{CHURN_TOPIC} generation {self.churn_generation} (values g"
                f"{self.churn_generation}-N) was just created: values of an earlier generation "
                "in it mean a deleted topic's records came back in its re-created namesake "
                "(seen when the deletion came while a broker was starting, before it caught up "
                "with the metadata log: its log of the deleted topic was adopted by the new one)"
            )
            raise
        self.note(f"  {CHURN_TOPIC} generation {self.churn_generation}: {len(values)} read back")
        self.applied["churn"] += 1


def _process_state(pid: int) -> str:
    """The state letter of /proc/PID/stat (T: stopped); '' if there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""
