"""Reading a local cluster's Prometheus endpoints in the benchmarks: replica and leader
counts, replica changes still to apply, under-replicated partitions, the active controller's
offline partitions, the metadata quorum's epoch, the broker's start phases and the event-loop
stall histogram of each node (`replog/server/metrics`).

A scrape names the families it reads (`?name[]=...`): the node then skips the families with a
series per partition, whose text alone costs ~0.5 s of a node's CPU at 10,000 replicas, and
reads counts it keeps up to date (~60 us of CPU at 33,000 replicas, whatever their number), so
polling a node every 50 ms while it restarts costs it little (node_state's docstring).
"""

from __future__ import annotations

import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

from replog.cli.bench.paced_polls import next_poll_s
from replog.cli.bench.wait_notice import WaitNotice
from replog.cli.local_cluster import METRICS_PORT_OFFSET

STALL_HISTOGRAM = "replog_event_loop_stall_seconds_bucket"
START_PHASES = "replog_broker_start_phase_time_seconds"
# The families `parse` reads: what a scrape asks the node for.
READ = (
    "replog_partitions",
    "replog_leader_partitions",
    "replog_pending_replica_changes",
    "replog_under_replicated_partitions",
    "replog_active_controller",
    "replog_offline_partitions",
    "replog_raft_current_epoch",
    START_PHASES,
    STALL_HISTOGRAM,
)
QUERY = "?" + urllib.parse.urlencode([("name[]", name) for name in READ])


def metrics_urls(base_port: int, nodes: int) -> list[str]:
    """The metrics endpoints of a `replog cluster start --base-port base_port` cluster."""
    return [f"http://127.0.0.1:{base_port + METRICS_PORT_OFFSET + i}/metrics" for i in range(nodes)]


@dataclass
class Scrape:
    """The figures of one node's metrics endpoint this benchmark reads."""

    partitions: int = 0
    leaders: int = 0
    pending: int = 0
    under_replicated: int = 0
    active_controller: bool = False
    offline: int = 0  # the active controller's figure (0 elsewhere)
    epoch: int = -1
    stall_buckets: dict[float, float] = field(default_factory=dict)  # le -> count
    start_phases: dict[str, float] = field(default_factory=dict)  # phase -> Unix time
    answered: bool = True  # False: the node did not answer (every figure is a default)


def scrape(url: str) -> Scrape | None:
    """One node's figures; None when it does not answer. A node that answers a scrape naming
    its families with none of them (one whose collectors do not describe their families: a
    replog from before they did, measured against in an A/B run) is scraped whole."""
    try:
        with urllib.request.urlopen(url + QUERY, timeout=5) as answer:
            page = answer.read().decode()
        if "replog_raft_current_epoch" not in page:
            with urllib.request.urlopen(url, timeout=5) as answer:
                page = answer.read().decode()
        return parse(page)
    except OSError:
        return None


def parse(text: str) -> Scrape:
    """The figures of a metrics page in Prometheus' text format."""
    found = Scrape()
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        name, _, value = line.rpartition(" ")
        if name == "replog_partitions":
            found.partitions = int(float(value))
        elif name == "replog_leader_partitions":
            found.leaders = int(float(value))
        elif name == "replog_pending_replica_changes":
            found.pending = int(float(value))
        elif name == "replog_under_replicated_partitions":
            found.under_replicated = int(float(value))
        elif name == "replog_active_controller":
            found.active_controller = float(value) == 1
        elif name == "replog_offline_partitions":
            found.offline = int(float(value))
        elif name == "replog_raft_current_epoch":
            found.epoch = int(float(value))
        elif name.startswith(STALL_HISTOGRAM):
            found.stall_buckets[float(_label(name, "le"))] = float(value)
        elif name.startswith(START_PHASES):
            found.start_phases[_label(name, "phase")] = float(value)
    return found


def _label(name: str, label: str) -> str:
    return name.split(f'{label}="', 1)[1].split('"', 1)[0]


def longest_stall_bucket(before: Scrape, after: Scrape) -> float:
    """The upper bound of the largest bucket that counted a stall between the two scrapes."""
    largest = 0.0
    previous = 0.0
    for bound in sorted(after.stall_buckets):
        added = after.stall_buckets[bound] - before.stall_buckets.get(bound, 0.0)
        if added > previous:  # cumulative buckets: a rise means stalls of up to `bound`
            largest = bound
        previous = added
    return largest


def scrapes(urls: list[str]) -> list[Scrape]:
    """Every node's figures (an empty `Scrape` for a node that does not answer)."""
    found = [scrape(url) for url in urls]
    return [s if s is not None else Scrape(answered=False) for s in found]


def wait_replicas(
    urls: list[str],
    partitions: int,
    replication_factor: int,
    timeout_s: float,
    *,
    before: tuple[int, int] = (0, 0),
    interval_s: float = 0.05,
    on_scrape: Callable[[float, list[Scrape]], None] | None = None,
    notice: WaitNotice | None = None,
    check: Callable[[], None] | None = None,
) -> list[Scrape]:
    """Until every replica of `partitions` partitions exists, every one is led, and no node has
    a replica change left to apply; the last scrapes, at least `interval_s` apart, paced by
    the creation's progress (`paced_polls.next_poll_s`): a scrape reads a few counts each node
    keeps, but it still hands each node's interpreter lock to its endpoint's thread, which the
    event loop then waits to get back, and costs this process a parse of every node's page,
    while the cores are what a creation's stalls wait for. `before`: the replicas and leaders
    the cluster held already (`settled_totals`), which the partitions come on top of.
    `on_scrape(seconds since the call, scrapes)` sees every scrape (a benchmark's phase
    times); `notice` is told where the wait stands after each.
    Past `timeout_s`, a RuntimeError names what was missing: replicas (per node), leaders and
    the replica changes each node still had to apply. `check()` runs before each scrape and
    raises to end the wait at once (a node that exited: its replicas would never come)."""
    replicas_before, leaders_before = before
    began = time.monotonic()
    deadline = began + timeout_s
    wanted = partitions * replication_factor
    first: int | None = None
    while True:
        if check is not None:
            check()
        now = scrapes(urls)
        if on_scrape is not None:
            on_scrape(time.monotonic() - began, now)
        replicas = sum(s.partitions for s in now) - replicas_before
        leaders = sum(s.leaders for s in now) - leaders_before
        state = (
            f"{replicas:,} of {partitions * replication_factor:,} replicas (per node "
            f"{[s.partitions if s.answered else None for s in now]}), {leaders:,} of "
            f"{partitions:,} leaders, replica changes to apply {[s.pending for s in now]}"
        )
        if notice is not None:
            notice.update(state)
        if (
            replicas == wanted
            and leaders == partitions
            and all(s.answered for s in now)
            and not any(s.pending for s in now)
        ):
            return now
        if time.monotonic() > deadline:
            raise RuntimeError(f"replicas not all created and led after {timeout_s:.0f} s: {state}")
        if first is None:
            first = replicas
        time.sleep(
            next_poll_s(interval_s, time.monotonic() - began, replicas - first, wanted - replicas)
        )


def settled_totals(urls: list[str], timeout_s: float, interval_s: float = 0.5) -> tuple[int, int]:
    """The cluster's replicas and leaders once every node answers, none has a replica change
    left to apply and two scrapes `interval_s` apart agree (a deletion still under way would
    change them). A node that does not answer counts for nothing here: totals without its
    replicas would let `wait_replicas` count them as new ones and end early."""
    deadline = time.monotonic() + timeout_s
    last: tuple[int, int] | None = None
    now: list[Scrape] = []
    while time.monotonic() < deadline:
        now = scrapes(urls)
        if not all(s.answered for s in now):
            last = None
        else:
            totals = (sum(s.partitions for s in now), sum(s.leaders for s in now))
            if not any(s.pending for s in now) and totals == last:
                return totals
            last = totals
        time.sleep(interval_s)
    raise RuntimeError(
        f"the cluster's replicas did not settle within {timeout_s:.0f} s (last scrape: replicas "
        f"per node {[s.partitions if s.answered else None for s in now]}, replica changes to "
        f"apply {[s.pending for s in now]})"
    )
