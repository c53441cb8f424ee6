"""replog/cli/bench/cluster_metrics.py (the controller workload and bench/ scripts read it):
parsing a node's metrics page and the longest stall between two scrapes, against a page in
Prometheus' text format."""

from __future__ import annotations

import inspect
import re
import urllib.parse

import pytest

from replog.cli.bench import cluster_metrics as metrics
from replog.cli.bench import paced_polls

PAGE = """# HELP replog_partitions Partition replicas on this broker
# TYPE replog_partitions gauge
replog_partitions 3334.0
replog_leader_partitions 1111.0
replog_pending_replica_changes 0.0
replog_raft_current_epoch 4.0
replog_under_replicated_partitions 12.0
replog_active_controller 1.0
replog_offline_partitions 3.0
replog_broker_start_phase_time_seconds{phase="started"} 1.7e+09
replog_broker_start_phase_time_seconds{phase="logs_loaded"} 1.700000005e+09
replog_event_loop_stall_seconds_bucket{le="0.01"} 90.0
replog_event_loop_stall_seconds_bucket{le="0.05"} 99.0
replog_event_loop_stall_seconds_bucket{le="0.1"} 100.0
replog_event_loop_stall_seconds_bucket{le="+Inf"} 100.0
"""


def test_a_page_is_read_into_its_figures() -> None:
    found = metrics.parse(PAGE)
    assert (found.partitions, found.leaders, found.pending, found.epoch) == (3334, 1111, 0, 4)
    assert found.stall_buckets == {0.01: 90.0, 0.05: 99.0, 0.1: 100.0, float("inf"): 100.0}
    assert (found.under_replicated, found.active_controller, found.offline) == (12, True, 3)
    assert found.start_phases == {"started": 1.7e9, "logs_loaded": 1.7e9 + 5}


def test_a_scrape_names_every_family_it_reads() -> None:
    """The node builds only the families named (node_state): one `parse` reads but the scrape
    did not ask for would always be missing."""
    asked = {v for k, v in urllib.parse.parse_qsl(metrics.QUERY[1:]) if k == "name[]"}
    read = set(re.findall(r'name == "(\w+)"', inspect.getsource(metrics.parse)))
    assert read | {metrics.STALL_HISTOGRAM, metrics.START_PHASES} == asked


def test_the_longest_stall_is_the_bucket_that_counted_the_last_new_stall() -> None:
    before = metrics.parse(PAGE)
    after = metrics.parse(
        PAGE.replace('"0.1"} 100.0', '"0.1"} 103.0').replace('Inf"} 100', 'Inf"} 103')
    )
    # Three new stalls, all between 50 and 100 ms.
    assert metrics.longest_stall_bucket(before, after) == 0.1
    assert metrics.longest_stall_bucket(before, before) == 0.0


def test_replicas_are_counted_on_top_of_what_the_cluster_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Three nodes' scrapes over time: a deletion still settling, then quiet, then the new
    # partitions' replicas arriving on top of the 4 replicas (2 leaders) left.
    pages = iter(
        [
            [metrics.Scrape(partitions=3, leaders=1, pending=1)] * 3,
            [metrics.Scrape(partitions=2, leaders=1)] * 2 + [metrics.Scrape()],
            [metrics.Scrape(partitions=2, leaders=1)] * 2 + [metrics.Scrape()],
            [metrics.Scrape(partitions=3, leaders=1)] * 3,
            [metrics.Scrape(partitions=12, leaders=6)] * 2 + [metrics.Scrape(partitions=10)],
        ]
    )
    monkeypatch.setattr(metrics, "scrapes", lambda urls: next(pages))
    monkeypatch.setattr(metrics.time, "sleep", lambda s: None)
    before = metrics.settled_totals([], timeout_s=60)
    assert before == (4, 2)
    last = metrics.wait_replicas([], 10, 3, timeout_s=60, before=before)
    assert sum(s.partitions for s in last) == 34 and sum(s.leaders for s in last) == 12


def test_wait_replicas_shows_every_scrape_and_polls_by_the_pace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [0.0]
    pages = iter(
        [
            [metrics.Scrape(partitions=10)] * 3,
            [metrics.Scrape(partitions=20)] * 3,
            [metrics.Scrape(partitions=1000, leaders=334)] * 2
            + [metrics.Scrape(partitions=1000, leaders=332)],
        ]
    )
    slept: list[float] = []
    seen: list[tuple[float, int]] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    monkeypatch.setattr(metrics, "scrapes", lambda urls: next(pages))
    monkeypatch.setattr(metrics.time, "sleep", sleep)
    monkeypatch.setattr(metrics.time, "monotonic", lambda: clock[0])
    # The pace alone here: the bound by the time waited has its own test
    # (tests/cli/test_bench_paced_polls.py).
    monkeypatch.setattr(paced_polls, "ELAPSED_FRACTION", 1e9)
    metrics.wait_replicas(
        [],
        1000,
        3,
        timeout_s=600,
        interval_s=0.05,
        on_scrape=lambda at, now: seen.append((at, sum(s.partitions for s in now))),
    )
    # The first scrape knows no pace; the second: 30 replicas in 0.05 s, 2,940 left (4.9 s).
    assert slept[0] == 0.05
    assert slept[1] == pytest.approx(2940 * 0.05 / 30 / 4)
    assert [total for _, total in seen] == [30, 60, 3000]
    assert [at for at, _ in seen] == pytest.approx([0, 0.05, 0.05 + slept[1]])


def test_a_long_wait_says_where_it_stands_and_its_timeout_names_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [0.0]
    monkeypatch.setattr(
        metrics,
        "scrapes",
        lambda urls: [
            metrics.Scrape(partitions=40, leaders=20, pending=3),
            metrics.Scrape(partitions=50, leaders=30),
            metrics.Scrape(answered=False),
        ],
    )
    monkeypatch.setattr(metrics.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    monkeypatch.setattr(metrics.time, "monotonic", lambda: clock[0])
    said: list[str] = []
    notice = metrics.WaitNotice("waiting for 50", clock=lambda: clock[0], say=said.append)
    with pytest.raises(RuntimeError) as raised:
        metrics.wait_replicas([], 50, 3, timeout_s=20, notice=notice)
    state = (
        "90 of 150 replicas (per node [40, 50, None]), 50 of 50 leaders, replica changes to "
        "apply [3, 0, 0]"
    )
    assert str(raised.value) == f"replicas not all created and led after 20 s: {state}"
    assert said[0].startswith(f"waiting for 50 ({state}, ") and len(said) == 1


def test_a_node_that_does_not_answer_is_not_counted_as_holding_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Totals settled while node 3 (9 replicas, 3 leaders) did not answer would count its old
    replicas as new ones: the wait for 100 new partitions would end with 97 of them."""
    held = metrics.Scrape(partitions=9, leaders=3)
    silent = metrics.Scrape(answered=False)
    pages = iter(
        [
            [held, held, silent],
            [held, held, silent],
            [held, held, held],
            [held, held, held],
            # 97 of the 100 new partitions' replicas and leaders on top of the 27 and 9 held.
            [metrics.Scrape(partitions=9 + 97, leaders=3 + 33)] * 2
            + [metrics.Scrape(partitions=9 + 97, leaders=3 + 31)],
            [metrics.Scrape(partitions=9 + 100, leaders=3 + 34)] * 2
            + [metrics.Scrape(partitions=9 + 100, leaders=3 + 32)],
        ]
    )
    monkeypatch.setattr(metrics, "scrapes", lambda urls: next(pages))
    monkeypatch.setattr(metrics.time, "sleep", lambda s: None)
    before = metrics.settled_totals([], timeout_s=60)
    assert before == (27, 9)
    last = metrics.wait_replicas([], 100, 3, timeout_s=60, before=before)
    assert sum(s.partitions for s in last) == 327


def test_totals_never_settle_while_a_node_does_not_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    monkeypatch.setattr(
        metrics,
        "scrapes",
        lambda urls: [metrics.Scrape(partitions=9), metrics.Scrape(answered=False)],
    )
    monkeypatch.setattr(metrics.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    monkeypatch.setattr(metrics.time, "monotonic", lambda: clock[0])
    with pytest.raises(RuntimeError, match=r"5 s \(last scrape: replicas per node \[9, None\]"):
        metrics.settled_totals([], timeout_s=5)
