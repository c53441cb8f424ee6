"""bench/stall_sources.py: a node log's logged stalls grouped by source, per start and stop of
the node."""

from __future__ import annotations

from bench_script import load_bench_script

sources = load_bench_script("stall_sources.py", "bench_stall_sources")

PREFIX = "2026-11-26 03:40:22,984 WARNING replog.server.loop_stall: "
LOG = [
    PREFIX + "the event loop was held for 304 ms (40 ms of it on a CPU): held in _watch "
    "(node_tasks.py:99): merge (partition_registration.py:67) < replay (delta.py:178) "
    "(3 of 11 samples)",
    PREFIX + "the event loop was held for 120 ms (90 ms of it on a CPU): held in _watch "
    "(node_tasks.py:99): merge (partition_registration.py:70) < replay (delta.py:178) "
    "(2 of 2 samples); 20 ms of it collecting garbage (generations up to 1)",
    PREFIX + "the event loop was held for 60 ms (5 ms of it on a CPU, 8 ms waiting for one); 45 ms "
    "of it collecting "
    "garbage (generations up to 2)",
    "2026-11-26 03:40:23,000 INFO replog.server: node 1: shutting down",
    PREFIX + "the event loop was held for 70 ms (65 ms of it on a CPU): held in "
    "_log_roles_taken (replica_manager.py:642) < _run_applier (replica_manager.py:514) "
    "(1 of 1 samples)",
]


def test_stalls_group_by_chain_without_line_numbers_per_start() -> None:
    first, second = sources.read_phases(LOG)
    assert (first.kind, second.kind) == ("start", "stop")
    assert (first.stalls, first.cpu_ms) == (3, 90)
    merge = first.sources["merge (partition_registration.py) < replay (delta.py)"]
    assert (merge.count, merge.cpu_ms, merge.wall_ms) == (2, 90, 304)
    assert first.sources["(no sample)"].count == 1
    # A full collection counts; a young one (generations up to 1) does not.
    assert (first.full_collections, first.collecting_ms) == (1, 45)
    (only,) = second.sources.values()
    assert (second.stalls, only.cpu_ms) == (1, 65)


def test_the_nodes_merge_phase_by_phase() -> None:
    one = sources.read_phases(LOG)
    two = sources.read_phases(LOG[:2])
    first, second = sources.merged([one, two])
    assert first.stalls == 5 and second.stalls == 1
    assert (first.full_collections, first.collecting_ms) == (1, 45)
    merge = first.sources["merge (partition_registration.py) < replay (delta.py)"]
    assert (merge.count, merge.cpu_ms) == (4, 90)


def test_a_restarted_node_begins_a_new_start_at_its_first_lines() -> None:
    restarted = [
        *LOG,
        "2026-11-26 03:40:30,000 INFO replog.server: garbage collector: 58006 start-up "
        "objects frozen",
        LOG[0],
        "2026-11-26 03:40:31,000 WARNING replog.server.fetcher: fetch from leader broker 3 "
        "failed: UNAVAILABLE: broker 3: the broker is shutting down",
        "2026-11-26 03:40:40,000 INFO replog.server: node 1: shutting down",
    ]
    phases = sources.read_phases(restarted)
    assert [(p.kind, p.stalls) for p in phases] == [
        ("start", 3),
        ("stop", 1),
        ("start", 1),
        ("stop", 0),
    ]
