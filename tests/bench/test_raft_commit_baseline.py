"""bench/raft_commit.py without etcd among its systems: it neither needs etcd nor invents a ratio.

Every benchmark prints its figures next to a baseline measured in the same run (etcd here). A
run of other systems only (`--systems embedded`) must start without etcd installed, check only
its own ports, and say in its table that there is no baseline, with no ratio column. The
script's `main` and `run` are driven with stand-ins for the systems: no process is started.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

import pytest
from bench_script import load_bench_script

raft_commit = load_bench_script("raft_commit.py", "raft_commit_bench")


class FixedSystem:
    """A system whose every trial commits `rate` records in one second."""

    def __init__(self, rate: int) -> None:
        self.rate = rate

    async def run_trial(self, proposers: int, seconds: float) -> Any:
        return raft_commit.Trial(self.rate, 1.0, [0.001] * self.rate, 0)


def run_table(systems: list[str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    args = argparse.Namespace(
        systems=systems, proposers=[1], trials=1, seconds=1.0, failover_trials=0
    )
    asyncio.run(
        raft_commit.run(
            args, FixedSystem(300), FixedSystem(100), FixedSystem(200), FixedSystem(900)
        )
    )
    out = capsys.readouterr().out
    return out[out.index("\n\n") + 2 :].splitlines()


def test_with_etcd_every_row_has_its_ratio_to_etcd(capsys: pytest.CaptureFixture[str]) -> None:
    header, etcd, embedded = run_table(["etcd", "embedded"], capsys)
    assert "ratio to etcd" in header
    assert "1.00x" in etcd and "2.00x" in embedded
    assert embedded.endswith("; 2.00 / 2.00 / 2.00")  # per trial: min / median / max


def test_without_etcd_the_table_says_there_is_no_baseline_and_shows_no_ratio(
    capsys: pytest.CaptureFixture[str],
) -> None:
    notice, header, embedded, noop = run_table(["embedded", "grpc-noop"], capsys)
    assert notice.startswith("no etcd baseline in this run")
    assert "ratio" not in header
    assert embedded.split()[:3] == ["embedded", "1", "200"]
    assert noop.split()[:3] == ["grpc-noop", "1", "900"]
    assert not any(line.rstrip().endswith("x") or "x " in line for line in (embedded, noop))


def test_a_run_without_etcd_needs_no_etcd_and_only_its_own_ports(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_etcd() -> None:
        raise AssertionError("etcd was required by a run without etcd")

    checked: list[int] = []
    ran: list[list[str]] = []

    async def run(args: argparse.Namespace, *systems: object) -> None:
        ran.append(list(args.systems))

    def port_free(port: int) -> bool:
        checked.append(port)
        return True

    monkeypatch.setattr(raft_commit, "ensure_etcd", no_etcd)
    monkeypatch.setattr(raft_commit, "port_free", port_free)
    monkeypatch.setattr(raft_commit, "run", run)
    monkeypatch.setenv("PATH", "/nonexistent")  # no etcd, etcdctl (nor anything) on PATH
    monkeypatch.setattr(sys, "argv", ["raft_commit.py", "--quick", "--systems", "embedded"])
    raft_commit.main()
    assert ran == [["embedded"]]
    embedded = raft_commit.REPLOG_BASE_PORT + raft_commit.EMBEDDED_OFFSET
    assert checked == [embedded + i for i in range(3)]
    assert "no etcd in this run" in capsys.readouterr().out


def test_a_run_with_etcd_still_installs_it_first(monkeypatch: pytest.MonkeyPatch) -> None:
    class Installing(Exception):
        pass

    def ensure_etcd() -> None:
        raise Installing

    monkeypatch.setattr(raft_commit, "ensure_etcd", ensure_etcd)
    monkeypatch.setattr(raft_commit, "port_free", lambda port: True)
    monkeypatch.setattr(sys, "argv", ["raft_commit.py", "--quick", "--systems", "etcd", "replog"])
    with pytest.raises(Installing):
        raft_commit.main()


@pytest.mark.parametrize("etcd_base_port", [27200, 27100, 27001])
def test_port_ranges_that_overlap_are_refused_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch, etcd_base_port: int
) -> None:
    # etcd at base + 200 took replog's Kafka listener ports; the run failed half-way through.
    monkeypatch.setattr(raft_commit, "ensure_etcd", lambda: pytest.fail("etcd was installed"))
    monkeypatch.setattr(raft_commit, "port_free", lambda port: True)
    monkeypatch.setattr(raft_commit, "run", lambda *a: pytest.fail("the run started"))
    argv = ["raft_commit.py", "--base-port", "27000", "--etcd-base-port", str(etcd_base_port)]
    monkeypatch.setattr(sys, "argv", [*argv, "--systems", "etcd", "replog"])
    with pytest.raises(SystemExit, match=r"give two servers the same ports \[27\d+"):
        raft_commit.main()


class StandInServer:
    """Takes any constructor arguments; records its starts and stops; starts no process."""

    events: list[str] = []

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def start(self) -> None:
        self.events.append(f"{type(self).__name__} start")

    def stop(self) -> None:
        self.events.append(f"{type(self).__name__} stop")

    def leader_endpoint(self) -> str:
        return "127.0.0.1:1"


def test_separate_port_ranges_pass_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []

    async def run(args: argparse.Namespace, *systems: object) -> None:
        ran.append("ran")

    # Stand-ins for every server, so the check is all this test runs: no etcd binary is needed
    # and no cluster is started on the test's ports.
    StandInServer.events = []
    for name in ("ReplogCluster", "EmbeddedReplogCluster", "NoOpAppendServer", "EtcdCluster"):
        monkeypatch.setattr(raft_commit, name, type(name, (StandInServer,), {}))
    monkeypatch.setattr(raft_commit, "ensure_etcd", lambda: None)
    monkeypatch.setattr(raft_commit.etcd_bench, "etcd_version", lambda: "etcd stand-in")
    monkeypatch.setattr(raft_commit, "port_free", lambda port: True)
    monkeypatch.setattr(raft_commit, "run", run)
    argv = ["raft_commit.py", "--base-port", "27000", "--etcd-base-port", "27300"]
    monkeypatch.setattr(sys, "argv", [*argv, "--systems", "etcd", "replog"])
    raft_commit.main()
    assert ran == ["ran"]
    assert StandInServer.events == [
        "EtcdCluster start",
        "ReplogCluster start",
        "NoOpAppendServer stop",
        "ReplogCluster stop",
        "EtcdCluster stop",
    ]
