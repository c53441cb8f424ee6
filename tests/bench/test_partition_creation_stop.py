"""bench/partition_creation.py counts a stop as unclean only when `cluster stop` killed a node,
not when it said it was waiting (its notice names the SIGKILL to come)."""

from __future__ import annotations

import pytest
from bench_script import load_bench_script

load_bench_script("replog_cli.py", "replog_cli")  # the script's import, by path as it is
bench = load_bench_script("partition_creation.py", "partition_creation_bench")

WAITING = (
    "waiting for node(s) 2 to stop: each broker hands its leaderships over (its controlled "
    "shutdown, up to 30 s), then closes its logs and writes its metadata snapshot; SIGKILL "
    "after 90 s\nstopped node 1 (pid 11)\nstopped node 2 (pid 12)\nstopped node 3 (pid 13)"
)
KILLED = "stopped node 1 (pid 11)\nkilled (SIGKILL after 90 s) node 2 (pid 12)\n"


@pytest.mark.parametrize(("said", "killed"), [(WAITING, False), (KILLED, True)])
def test_a_stop_is_unclean_only_when_a_node_was_killed(
    monkeypatch: pytest.MonkeyPatch, said: str, killed: bool
) -> None:
    monkeypatch.setattr(bench, "replog_cli", lambda *args: said)
    _, found = bench.Cluster("unused", 0, 0).stop()
    assert found is killed
