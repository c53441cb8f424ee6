"""A local cluster's start as a timeline, for the restart benchmark (bench/partition_creation.py):
where the seconds between `cluster start` and a cluster that serves every partition go.

- Per node, when its broker reached each phase of its start (`broker_runtime.START_PHASES`:
  started, registered, metadata caught up, logs loaded, replicas applied, unfenced), as the
  node itself stamped them (`replog_broker_start_phase_time_seconds`, Unix time: the
  benchmark runs on the same machine, so its own clock places them).
- For the cluster, the first poll at which each of `CLUSTER_PHASES` held: `leaders_elected`,
  the active controller counts no partition without a leader (once a broker is unfenced: a
  controller that has not replayed the metadata log yet counts none either);
  `leaders_taken`, the brokers lead every partition; `isrs_full`, and none of them is
  under-replicated; `ready`, the benchmark's condition (`cluster_metrics.wait_replicas`:
  every replica exists, every partition is led, no replica change is left to apply).

Every time is in seconds since the `began` the watch was started with. A poll names only the
families it reads (`cluster_metrics.QUERY`), so polling costs the nodes little.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from replog.cli.bench.cluster_metrics import Scrape, scrapes

# The broker's `START_PHASES` (replog/server/broker/broker_runtime.py; not imported: a bench script
# run from bench/ cannot import the server's modules, bench/timeline.py shadows a package).
NODE_PHASES = (
    "started",
    "registered",
    "metadata_caught_up",
    "logs_loaded",
    "replicas_applied",
    "unfenced",
)
CLUSTER_PHASES = ("leaders_elected", "leaders_taken", "isrs_full", "ready")


@dataclass
class StartTimeline:
    """Seconds since the start: per node (its phases), and for the cluster."""

    nodes: list[dict[str, float]] = field(default_factory=list)
    cluster: dict[str, float] = field(default_factory=dict)
    last: list[Scrape] = field(default_factory=list)  # the last poll's scrapes


def phases_held(now: list[Scrape], partitions: int, replication_factor: int) -> set[str]:
    """Which of `CLUSTER_PHASES` hold in one poll of every node."""
    held: set[str] = set()
    replicas = sum(s.partitions for s in now)
    leaders = sum(s.leaders for s in now)
    if any("unfenced" in s.start_phases for s in now) and any(
        s.active_controller and s.offline == 0 for s in now
    ):
        held.add("leaders_elected")
    if leaders == partitions:
        held.add("leaders_taken")
        if not any(s.under_replicated for s in now):
            held.add("isrs_full")
        if replicas == partitions * replication_factor and not any(s.pending for s in now):
            held.add("ready")
    return held


class TimelineWatch:
    """Polls every node from `start` on, in a thread, noting when each cluster phase first
    held; `wait_ready` returns the timeline once the cluster is ready and its ISRs were full
    (or `isr_grace_s` after it was ready: a partition's ISR may fill after "ready")."""

    def __init__(
        self,
        urls: list[str],
        partitions: int,
        replication_factor: int,
        *,
        interval_s: float = 0.05,
        isr_grace_s: float = 60.0,
    ) -> None:
        self._urls = urls
        self._partitions = partitions
        self._replication_factor = replication_factor
        self._interval_s = interval_s
        self._isr_grace_s = isr_grace_s
        self._began = 0.0
        self._timeline = StartTimeline()
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, began: float) -> None:
        """Poll from now on; `began` is the Unix time the start began (`time.time()`)."""
        self._began = began
        self._thread = threading.Thread(target=self._poll, name="start timeline", daemon=True)
        self._thread.start()

    def wait_ready(self, timeout_s: float) -> StartTimeline:
        """The timeline once the cluster is ready; RuntimeError naming what it still lacked
        after `timeout_s`."""
        ready = self._ready.wait(timeout_s)
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        timeline = self._timeline
        timeline.nodes = [
            {phase: at - self._began for phase, at in s.start_phases.items()} for s in timeline.last
        ]
        if not ready:
            raise RuntimeError(
                f"the cluster was not ready after {timeout_s:.0f} s; reached "
                f"{sorted(timeline.cluster)}; last scrapes {timeline.last}"
            )
        return timeline

    def _poll(self) -> None:
        while not self._stop.is_set():
            now = scrapes(self._urls)
            at = time.time() - self._began
            self._timeline.last = now
            for phase in phases_held(now, self._partitions, self._replication_factor):
                self._timeline.cluster.setdefault(phase, at)
            ready_at = self._timeline.cluster.get("ready")
            if ready_at is not None and (
                "isrs_full" in self._timeline.cluster or at > ready_at + self._isr_grace_s
            ):
                self._ready.set()
                return
            self._stop.wait(self._interval_s)
