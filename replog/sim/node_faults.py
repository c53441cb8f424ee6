"""`NodeFaults`: the faults of a simulation run that strike one node's machine rather than the
network: its disk fails (EIO on writes, fsyncs or reads) or fills up (ENOSPC), turns slow, or
its wall clock jumps. Every choice comes from the seeded `random.Random` given.

Rules:
- At most one node's disk fails at a time (`fail_disk`): from then on each operation of the
  chosen kind fails with EIO at the fault's rate, or writes past a small free space fail with
  ENOSPC, until `repair_disk` (the disk replaced or space freed, while the node is down or up).
- A node stops on a disk failure, as a node process does (`node_tasks`: a task that ends with
  an error ends the run, and a storage error is how the disk's failure reaches a task): after
  every iteration of the loop `stop_failed_nodes` stops each node whose tasks ended with
  `KafkaStorageError` after its disk failed it (since the node last started: a slow disk's
  error may reach its task after the repair). Its disk keeps what the process wrote (kill),
  except after a failed fsync: then only what was synced (the kernel may drop the pages it
  could not write back, so nothing unsynced can be counted on). A failure of a node whose disk
  is healthy, or one that is not a storage error, is left to the checker: it is a bug.
- A node whose disk has failed may fail to start (`start`): it stays down, counted.
- A clean restart (`clean_restart`, an operator's rolling restart) stops the node as SIGTERM
  does (`SimCluster.shut_down`: controlled shutdown, logs closed with the clean-shutdown
  marker), within `CLEAN_STOP_GRACE_S` or it is killed (a supervisor's grace period), then
  starts it (`start`). A failed fsync during the stop leaves only what was synced, as above.
- A slow disk (`slow_disk`) takes virtual time for each write and fsync (`VirtualLoop.block`):
  a worker thread's work finishes later, work on the loop holds the whole loop.
- A clock jump (`jump_clock`) moves the node's wall clock forward or back; its monotonic clock
  (the loop's) never goes back.
- While `suspended`, no fault fires and no disk is slow: the checker reads the nodes' logs
  then, which no node's disk may fail or slow.
- `heal` ends every disk fault and slow disk (the liveness phase); clocks stay where they
  jumped to. A node that stops on its disk after that is started again at once, on the
  repaired disk (a supervisor restarting it).
"""

from __future__ import annotations

import errno
import os
import random
from collections.abc import Callable
from dataclasses import dataclass

from replog.errors import KafkaStorageError
from replog.sim.cluster import SimCluster

__all__ = ["DISK_ERROR_KINDS", "NodeFaults"]

DISK_ERROR_KINDS = ("write", "sync", "read")  # the operations an EIO fault fails
EIO_RATES = (0.05, 0.5, 1.0)
FREE_BYTES = (0, 2_000, 20_000)  # what a full disk has left when its fault starts
SLOW_WRITE_MS = (1, 5, 20)
SLOW_SYNC_MS = (10, 50, 200)
CLOCK_JUMPS_MS = (1_000, 30_000, 600_000, 3_600_000)
CLEAN_STOP_GRACE_S = 5.0


@dataclass
class _DiskFault:
    """A failed disk: `kind` an operation failing with EIO at `rate`, or "full" (ENOSPC)."""

    node_id: int
    kind: str
    rate: float = 1.0


@dataclass
class _SlowDisk:
    write_ms: int
    sync_ms: int


class _Suspension:
    """`NodeFaults.suspended`'s context: the faults off within, on again after."""

    def __init__(self, suspend: Callable[[bool], None]) -> None:
        self._suspend = suspend

    def __enter__(self) -> None:
        self._suspend(True)

    def __exit__(self, *exc_info: object) -> None:
        self._suspend(False)


class NodeFaults:
    """The faults of the nodes' machines in one run (module docstring)."""

    def __init__(self, cluster: SimCluster, rng: random.Random) -> None:
        self._cluster = cluster
        self._rng = rng
        self.failed_disk: _DiskFault | None = None
        self.slow: dict[int, _SlowDisk] = {}
        self._suspended = False
        self._suspension = _Suspension(self._suspend)
        self._healed = False
        # node -> how its disk failed it (an EIO's operation, or "full") since it last started
        self._failed_it: dict[int, str] = {}
        self.disk_errors = 0  # EIO faults begun
        self.full_disks = 0
        self.slow_disks = 0
        self.clock_jumps = 0
        self.fail_stops = 0  # nodes stopped by a failed disk
        self.failed_starts = 0
        self.clean_restarts = 0  # begun
        # The cluster's `task_errors` at the last look that left no node with an error.
        self._errors_seen = -1
        for node in cluster.nodes.values():
            node.disk.on_operation = self._hook(node.node_id)  # kept across crashes

    # --- the hook -----------------------------------------------------------------------------

    def _hook(self, node_id: int) -> Callable[[str, str], None]:
        loop = self._cluster.loop

        def on_operation(op: str, path: str) -> None:
            if self._suspended:
                return
            fault = self.failed_disk
            if (
                fault is not None
                and fault.node_id == node_id
                and fault.kind == op
                and (fault.rate >= 1.0 or self._rng.random() < fault.rate)
            ):
                self._failed_it[node_id] = op
                raise OSError(errno.EIO, os.strerror(errno.EIO), path)
            slow = self.slow.get(node_id)
            if slow is not None:
                if op == "write":
                    loop.block(slow.write_ms / 1000)
                elif op == "sync":
                    loop.block(slow.sync_ms / 1000)

        return on_operation

    def suspended(self) -> _Suspension:
        """No fault fires and no disk is slow meanwhile (module Rules); one object, not a
        generator, since the checks suspend the faults after every iteration of the loop."""
        return self._suspension

    def _suspend(self, suspended: bool) -> None:
        self._suspended = suspended

    # --- the faults ---------------------------------------------------------------------------

    def fail_disk(self, node_id: int, kind: str | None = None, rate: float | None = None) -> str:
        """Node `node_id`'s disk fails (module Rules): EIO on `kind` (one of
        `DISK_ERROR_KINDS`) at `rate`, or full ("full"), each chosen by the seed unless
        given; what happened, for the run's events."""
        assert self.failed_disk is None, "one failed disk at a time"
        rng = self._rng
        kind = kind or rng.choice((*DISK_ERROR_KINDS, "full"))
        if kind == "full":
            free = rng.choice(FREE_BYTES)
            self._cluster.nodes[node_id].disk.fill_after(free)
            self.failed_disk = _DiskFault(node_id, kind)
            self._failed_it[node_id] = kind
            self.full_disks += 1
            return f"disk of node {node_id} full ({free} bytes left)"
        if kind not in DISK_ERROR_KINDS:
            raise ValueError(f"a disk fails on one of {DISK_ERROR_KINDS} or is full, not {kind!r}")
        rate = rate if rate is not None else rng.choice(EIO_RATES)
        self.failed_disk = _DiskFault(node_id, kind, rate)
        self.disk_errors += 1
        return f"disk of node {node_id} fails: EIO on {kind} at rate {rate}"

    def repair_disk(self) -> str | None:
        """The failed disk is replaced or given space; what happened (None: none had failed)."""
        fault = self.failed_disk
        if fault is None:
            return None
        self.failed_disk = None
        self._cluster.nodes[fault.node_id].disk.capacity = None
        return f"disk of node {fault.node_id} repaired"

    def slow_disk(self, node_id: int) -> str:
        """Node `node_id`'s disk turns slow, or fast again if it was slow."""
        if self.slow.pop(node_id, None) is not None:
            return f"disk of node {node_id} fast again"
        slow = _SlowDisk(self._rng.choice(SLOW_WRITE_MS), self._rng.choice(SLOW_SYNC_MS))
        self.slow[node_id] = slow
        self.slow_disks += 1
        return f"disk of node {node_id} slow ({slow.write_ms} ms a write, {slow.sync_ms} an fsync)"

    def jump_clock(self, node_id: int) -> str:
        """Node `node_id`'s wall clock jumps forward or back (module Rules)."""
        jump_ms = self._rng.choice(CLOCK_JUMPS_MS) * self._rng.choice((1, -1))
        self._cluster.nodes[node_id].jump_wall_clock(jump_ms)
        self.clock_jumps += 1
        return f"wall clock of node {node_id} jumps {jump_ms:+} ms"

    def heal(self) -> None:
        """Every disk healthy and fast again (module Rules)."""
        self.repair_disk()
        self.slow.clear()
        self._healed = True
        for node in self._cluster.nodes.values():
            if not node.up:  # its next start is a new process on a healthy disk
                self._failed_it.pop(node.node_id, None)

    # --- what the nodes do about them ---------------------------------------------------------

    def _disk_failed(self, node_id: int) -> str | None:
        """How node `node_id`'s disk failed it since it last started (None: it did not)."""
        fault = self.failed_disk
        if fault is not None and fault.node_id == node_id and fault.kind == "full":
            return "full"  # a full disk fails what it fails from the start
        return self._failed_it.get(node_id)

    def start(self, node_id: int) -> str:
        """Start node `node_id` (`SimCluster.start`); on a failed disk the start may fail,
        and the node stays down (module Rules). What happened."""
        try:
            self._cluster.start(node_id)
        except (OSError, KafkaStorageError) as error:
            if self._disk_failed(node_id) is None:
                raise
            self.failed_starts += 1
            return f"node {node_id} failed to start on its failed disk: {error}"
        finally:
            self._failed_it.pop(node_id, None)  # a new process: what failed the old is past
        return f"start node {node_id}"

    async def clean_restart(self, node_id: int) -> list[str]:
        """Stop node `node_id` cleanly, then start it (module Rules); what happened."""
        cluster = self._cluster
        node = cluster.nodes[node_id]
        incarnation = node.incarnation
        self.clean_restarts += 1
        clean = await cluster.shut_down(node_id, CLEAN_STOP_GRACE_S)
        if node.incarnation != incarnation or not node.up:
            return [f"node {node_id}'s clean stop cut short by its fail-stop"]
        done = [f"clean stop of node {node_id}" + ("" if clean else " killed after its grace")]
        if self._disk_failed(node_id) == "sync":
            cluster.power_loss(node_id)
        else:
            cluster.kill(node_id)
        return [*done, self.start(node_id)]

    def stop_failed_nodes(self) -> list[str]:
        """Stop each node whose task ended on its failed disk (module Rules); what happened.
        Looks at the nodes only once a task ended with an error (the cluster's `task_errors`)
        since a look that left every node without one."""
        task_errors = self._cluster.task_errors
        if task_errors == self._errors_seen:
            return []  # no task ended with an error since a look that left none
        stopped: list[str] = []
        nodes = self._cluster.nodes
        for node in nodes.values():
            errors = node.tasks.errors
            if not errors or node.raft is None:
                continue
            # Its other tasks that ended on the disk in the same turn stop it too, rather
            # than being reported once it is stopped.
            node.tasks.settle()
            how = self._disk_failed(node.node_id)
            if how is None or not all(isinstance(e, KafkaStorageError) for e in errors):
                continue  # the checker's to report
            cause = node.tasks.failures[0]
            node.tasks.errors.clear()
            node.tasks.failures.clear()
            self._failed_it.pop(node.node_id, None)
            if how == "sync":
                self._cluster.power_loss(node.node_id)
            else:
                self._cluster.kill(node.node_id)
            self.fail_stops += 1
            stopped.append(f"node {node.node_id} stopped on its failed disk: {cause}")
            if self._healed:  # at the loop's next turn: a start runs on the loop
                self._cluster.loop.call_soon(self._start_again, node.node_id)
                stopped.append(f"node {node.node_id} starts again on its repaired disk")
        if not any(node.tasks.errors for node in nodes.values()):
            self._errors_seen = task_errors
        return stopped

    def _start_again(self, node_id: int) -> None:
        if not self._cluster.nodes[node_id].up:
            self._cluster.start(node_id)
