"""The README's main job, `replog demo`, run the way the README runs it: the installed `replog`
command in a subprocess, with its default sizes (only the data directory and the base port
differ, so the test neither touches `./.replog` nor collides with other clusters).

What it proves: the whole job (a 3-node cluster, a keyed acks=all idempotent stream through a
leader's SIGKILL and restart, the exactly-once verification, the Spark aggregation, the stop)
exits 0 with the lines that say every check held, its clients bootstrap from the brokers'
Kafka listeners, the failure really happened (a node was killed and restarted, partitions
were seen under-replicated and then not), and no node process is left afterwards.

How it can fail: a non-zero exit (any check of the demo failing: a lost, duplicated or
reordered event, Spark disagreeing with the verification, a node not rejoining the ISRs), a
missing or different verification line, URP never above 0 (the kill showed nothing), or a
node process still running once the command returned.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from replog.cli.demo_command import DEFAULT_RECORDS
from tests.local_ports import free_base_port

pytestmark = pytest.mark.slow

NODES = 3
TIMEOUT_S = 600


def node_processes(data_dir: Path) -> list[int]:
    """Pids of processes whose command line names `data_dir` (the demo's node processes)."""
    needle = str(data_dir).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in cmdline and b"node" in cmdline.split(b"\0") and state != "Z":
            found.append(int(entry.name))
    return found


def test_the_readme_main_job_holds_every_check(tmp_path: Path) -> None:
    replog = Path(sys.executable).parent / "replog"
    assert replog.exists(), f"{replog}: the README's command runs the installed `replog`"
    data_dir = tmp_path / "demo"
    command = [str(replog), "demo", "--data-dir", str(data_dir), "--base-port"]
    base_port = free_base_port(NODES)
    try:
        result = subprocess.run(
            [*command, str(base_port)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    finally:
        leftovers = node_processes(data_dir)
        for pid in leftovers:  # never leave them running, even when the test fails
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    out = result.stdout
    assert result.returncode == 0, f"exit {result.returncode}\n{out}\n{result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    assert leftovers == [], f"node processes left running: {leftovers}"

    for number in range(1, 9):
        assert f"[{number}/8] " in out, f"step {number} missing:\n{out}"
    # The clients and Spark bootstrap from the brokers' Kafka listeners (base port + 200..).
    kafka = ",".join(f"127.0.0.1:{base_port + 200 + i}" for i in range(NODES))
    assert f"; bootstrap {kafka}\n" in out, out
    assert "creating topic 'events': 3 partitions, replication factor 3, min.insync.replicas=2" in (
        out
    )

    # The failure happened mid-stream, was seen, and healed.
    killed = re.search(r"<- SIGKILL node (\d) \(pid \d+\), leader of events-0", out)
    assert killed, out
    assert "the stream had already ended" not in out
    assert re.search(rf"restarted node {killed.group(1)} \(pid \d+\)", out), out
    urps = [int(u) for u in re.findall(r"^  t=.* URP (\d+)", out, re.MULTILINE)]
    assert max(urps) >= 1, f"no under-replicated partition was ever seen: {urps}"
    assert urps[-1] == 0, urps
    assert re.search(r"back in every ISR by t=[\d.]+s \(URP 0\)", out), out
    assert "acks/s" in out and "\n  URP " in out  # the series table

    # The verification's figures: every acknowledged event exactly once, in order.
    figures = re.search(
        r"acknowledged sends: ([\d,]+); in the log exactly once: ([\d,]+); lost: 0; "
        r"duplicated: 0",
        out,
    )
    assert figures, out
    acknowledged = int(figures.group(1).replace(",", ""))
    assert int(figures.group(2).replace(",", "")) == acknowledged
    failed_sends = re.search(r"failed sends: ([\d,]+)", out)
    assert failed_sends, out
    failed = int(failed_sends.group(1).replace(",", ""))
    assert acknowledged + failed == DEFAULT_RECORDS
    assert acknowledged >= DEFAULT_RECORDS * 0.99, "nearly every send should be acknowledged"
    assert "per-key order: every key in sequence order; records that were never sent: 0" in out
    assert "exactly once: OK" in out
    read = re.search(r"read ([\d,]+) records in", out)
    assert read, out
    in_log = int(read.group(1).replace(",", ""))
    assert acknowledged <= in_log <= DEFAULT_RECORDS

    # Spark read exactly the verified records and printed the aggregation.
    assert f"Spark read {in_log:,} rows" in out
    assert "Spark row count and sum equal the verified ones: yes" in out
    assert "|key_group|keys|events|amount" in out

    # Stopped: one line per node, and the closing line.
    assert len(re.findall(r"^  (stopped|killed) .*node \d \(pid \d+\)", out, re.MULTILINE)) == 3
    assert out.rstrip().endswith(
        "OK: every acknowledged event survived the leader's SIGKILL exactly once, in order, "
        "and Spark read the same records"
    )
