"""Reading a local cluster's Prometheus endpoints in the benchmarks: replica and leader
counts, replica changes still to apply, the metadata quorum's epoch and the event-loop stall
histogram of each node (`replog/server/metrics`)."""

from __future__ import annotations

import time
import urllib.request
from dataclasses import dataclass, field

from replog.cli.local_cluster import METRICS_PORT_OFFSET

STALL_HISTOGRAM = "replog_event_loop_stall_seconds_bucket"


def metrics_urls(base_port: int, nodes: int) -> list[str]:
    """The metrics endpoints of a `replog cluster start --base-port base_port` cluster."""
    return [f"http://127.0.0.1:{base_port + METRICS_PORT_OFFSET + i}/metrics" for i in range(nodes)]


@dataclass
class Scrape:
    """The figures of one node's metrics endpoint this benchmark reads."""

    partitions: int = 0
    leaders: int = 0
    pending: int = 0
    epoch: int = -1
    stall_buckets: dict[float, float] = field(default_factory=dict)  # le -> count


def scrape(url: str) -> Scrape | None:
    """One node's figures; None when it does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return parse(answer.read().decode())
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
        elif name == "replog_raft_current_epoch":
            found.epoch = int(float(value))
        elif name.startswith(STALL_HISTOGRAM):
            bound = name.split('le="', 1)[1].split('"', 1)[0]
            found.stall_buckets[float(bound)] = float(value)
    return found


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
    return [s if s is not None else Scrape() for s in found]


def wait_replicas(
    urls: list[str],
    partitions: int,
    replication_factor: int,
    timeout_s: float,
    *,
    before: tuple[int, int] = (0, 0),
) -> list[Scrape]:
    """Until every replica of `partitions` partitions exists, every one is led, and no node has
    a replica change left to apply; the last scrapes. `before`: the replicas and leaders the
    cluster held already (`settled_totals`), which the partitions come on top of."""
    replicas_before, leaders_before = before
    deadline = time.monotonic() + timeout_s
    while True:
        now = scrapes(urls)
        replicas = sum(s.partitions for s in now) - replicas_before
        leaders = sum(s.leaders for s in now) - leaders_before
        if (
            replicas == partitions * replication_factor
            and leaders == partitions
            and not any(s.pending for s in now)
        ):
            return now
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"replicas not all created and led after {timeout_s:.0f} s: {replicas} of "
                f"{partitions * replication_factor} replicas, {leaders} of {partitions} "
                f"leaders, pending {[s.pending for s in now]}"
            )
        time.sleep(0.05)


def settled_totals(urls: list[str], timeout_s: float, interval_s: float = 0.5) -> tuple[int, int]:
    """The cluster's replicas and leaders once no node has a replica change left to apply and
    two scrapes `interval_s` apart agree (a deletion still under way would change them)."""
    deadline = time.monotonic() + timeout_s
    last: tuple[int, int] | None = None
    while time.monotonic() < deadline:
        now = scrapes(urls)
        totals = (sum(s.partitions for s in now), sum(s.leaders for s in now))
        if not any(s.pending for s in now) and totals == last:
            return totals
        last = totals
        time.sleep(interval_s)
    raise RuntimeError(f"the cluster's replicas did not settle within {timeout_s:.0f} s")
