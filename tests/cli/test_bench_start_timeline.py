"""replog/cli/bench/start_timeline.py (bench/partition_creation.py's restart timeline): which
cluster phases one poll of every node shows, and the node phases it names are the broker's."""

from __future__ import annotations

from replog.cli.bench.cluster_metrics import Scrape
from replog.cli.bench.start_timeline import NODE_PHASES, phases_held
from replog.server.broker.broker_runtime import START_PHASES

UNFENCED = {"unfenced": 1.0}


def test_the_node_phases_are_the_brokers() -> None:
    assert NODE_PHASES == START_PHASES


def test_leaders_elected_needs_an_active_controller_with_none_offline_and_an_unfenced_broker() -> (
    None
):
    # A controller that has not replayed the log yet counts no partition offline either.
    before = [Scrape(active_controller=True), Scrape(), Scrape()]
    assert phases_held(before, 10, 3) == set()
    offline = [Scrape(active_controller=True, offline=4, start_phases=UNFENCED), Scrape()]
    assert phases_held(offline, 10, 3) == set()
    elected = [Scrape(active_controller=True, start_phases=UNFENCED), Scrape()]
    assert phases_held(elected, 10, 3) == {"leaders_elected"}


def test_taken_full_and_ready_follow_the_brokers_counts() -> None:
    led = [Scrape(partitions=10, leaders=5, under_replicated=2), Scrape(partitions=10, leaders=5)]
    assert phases_held(led, 10, 3) == {"leaders_taken"}  # 20 of 30 replicas
    full = [Scrape(partitions=15, leaders=5), Scrape(partitions=15, leaders=5, pending=1)]
    assert phases_held(full, 10, 3) == {"leaders_taken", "isrs_full"}
    ready = [Scrape(partitions=15, leaders=5, under_replicated=1), Scrape(partitions=15, leaders=5)]
    assert phases_held(ready, 10, 3) == {"leaders_taken", "ready"}
