"""Metadata quorum commit benchmark: replog's 3-voter quorum against a 3-member etcd cluster.

Both systems run as three local processes on loopback, started (and stopped) by this script.
Each trial drives one system for `--seconds` with P concurrent proposers (P in `--proposers`),
every proposer sending one 100-byte record at a time and waiting until it is committed:

- replog: gRPC `MetadataLog.Append(values=[record])` on the leader (it answers once the record
  is committed by the quorum); the nodes run a bare Raft log (`metadata.log.raw.append.enable`);
- replog-framed: the same cluster and appends over one metadata append connection to the
  leader (`MetadataAppendClient`, framed TCP on `controller.quorum.append.port`): all P
  proposers' appends in flight on it at once, without gRPC's per-call cost;
- embedded: the same quorum, with the proposers inside the leader's process
  (`bench/embedded_proposers.py`): how an embedding application, or the controller, proposes;
- etcd: gRPC `/etcdserverpb.KV/Put` on the leader, with a hand-encoded PutRequest (no etcd
  Python package needed), answered once the put is committed;
- grpc-noop: a Python gRPC server that answers Append at once (`bench/noop_append_server.py`):
  the ceiling of one Python gRPC call per proposal on this machine, nothing committed.

Trials alternate between the systems (etcd, replog, replog-framed, embedded, grpc-noop, etcd,
...) so all see the same machine load; the table reports the median over trials of commits/s,
p50 and p99 latency, the ratio to etcd, and each trial's ratio to the etcd trial of its round
(min / median / max). etcd is the baseline, measured in the same run: a run whose
`--systems` leave it out neither needs etcd installed nor prints a ratio (the table says there
is no etcd baseline in this run; a ratio to a figure from another run would compare machine
loads, not systems). Then failover: kill -9 the replog leader and time until a record
proposed to the survivors is committed, over `--failover-trials` trials (the killed node is
restarted and caught up between trials).

    .venv/bin/python bench/raft_commit.py                  # full run (~2 minutes)
    .venv/bin/python bench/raft_commit.py --quick          # smoke run
    .venv/bin/python bench/raft_commit.py --systems etcd embedded --failover-trials 0
    .venv/bin/python bench/raft_commit.py --quick --systems embedded   # no etcd needed
    .venv/bin/python bench/raft_commit.py --base-port 26000 --etcd-base-port 26500  # ports

Ports: replog's nodes listen from `--base-port` (metrics 100 above, Kafka listeners 200 above),
the embedded trials' from 10 above it, grpc-noop 20 above it; etcd member i on
`--etcd-base-port` + 10 i (client) and + 10 i + 1 (peer).

etcd comes from Debian's etcd-server; `bench/install_etcd.sh` installs it when etcd is among
the systems and `etcd` is not on PATH.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import grpc

from replog.cli.bench import etcd as etcd_bench
from replog.cli.bench.etcd import ensure_etcd
from replog.cli.local_cluster import METRICS_PORT_OFFSET, LocalCluster
from replog.errors import ReplogError
from replog.pb import raft_pb2 as pb
from replog.pb import raft_pb2_grpc
from replog.server.raft.metadata_append_client import MetadataAppendClient

HERE = os.path.dirname(os.path.abspath(__file__))
RECORD_SIZE = 100
REPLOG_BASE_PORT = 19492  # --base-port
EMBEDDED_OFFSET = 10  # the embedded trials' nodes: base port + 10
NOOP_OFFSET = 20
KAFKA_OFFSET = 200  # the replog nodes' Kafka listeners (none would be used; none on 9092)
CLUSTER_OFFSETS = (0, METRICS_PORT_OFFSET, KAFKA_OFFSET)  # a cluster node's three ports
ETCD_BASE_PORT = 23790  # member i: client port base + 10 * i, peer port base + 10 * i + 1
SYSTEMS = ("etcd", "replog", "replog-framed", "embedded", "grpc-noop")
REPLOG_CLUSTER = ("replog", "replog-framed")  # the systems run on the one `cluster start` cluster
NAME_WIDTH = max(len(name) for name in SYSTEMS)
BASELINE = "etcd"
NO_BASELINE = f"no {BASELINE} baseline in this run: no ratios (add {BASELINE} to --systems)"


# --- results --------------------------------------------------------------------------------


@dataclass
class Trial:
    commits: int
    seconds: float
    latencies_s: list[float]
    errors: int

    @property
    def rate(self) -> float:
        return self.commits / self.seconds

    def percentile_ms(self, q: float) -> float:
        if not self.latencies_s:
            return float("nan")
        ordered = sorted(self.latencies_s)
        index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
        return ordered[index] * 1000.0


@dataclass
class Summary:
    system: str
    proposers: int
    rate: float
    p50_ms: float
    p99_ms: float
    rates: list[float]


def summarize(system: str, proposers: int, trials: list[Trial]) -> Summary:
    return Summary(
        system,
        proposers,
        statistics.median(t.rate for t in trials),
        statistics.median(t.percentile_ms(0.50) for t in trials),
        statistics.median(t.percentile_ms(0.99) for t in trials),
        [t.rate for t in trials],
    )


# --- the load loop shared by both systems ----------------------------------------------------


async def drive(
    propose: Callable[[bytes], Awaitable[bool]], proposers: int, seconds: float
) -> Trial:
    """`proposers` tasks, each proposing one record at a time until `seconds` have passed."""
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds

    async def proposer(index: int) -> None:
        nonlocal errors
        sequence = 0
        while True:
            start = time.perf_counter()
            if start >= deadline:
                return
            record = f"{index:04d}-{sequence:012d}-".encode().ljust(RECORD_SIZE, b"x")
            sequence += 1
            ok = await propose(record)
            if ok:
                latencies.append(time.perf_counter() - start)
            else:
                errors += 1

    began = time.perf_counter()
    await asyncio.gather(*(proposer(i) for i in range(proposers)))
    elapsed = time.perf_counter() - began
    return Trial(len(latencies), elapsed, latencies, errors)


# --- replog ----------------------------------------------------------------------------------


def replog_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run `replog ARGS`; with `check`, a failure raises naming the command and what it said
    (a port already in use, say), not only its exit status."""
    done = subprocess.run(
        [sys.executable, "-m", "replog.cli.main", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if check and done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise RuntimeError(
            f"`replog {' '.join(args)}` exited with code {done.returncode}: " + " / ".join(said)
        )
    return done


class ReplogCluster:
    def __init__(self, directory: str, base_port: int) -> None:
        self.directory = directory
        self.base_port = base_port
        self.addresses: dict[int, str] = {}

    def start(self) -> None:
        replog_cli(
            "cluster",
            "start",
            "--nodes",
            "3",
            "--data-dir",
            self.directory,
            "--base-port",
            str(self.base_port),
            "--kafka-base-port",
            str(self.base_port + KAFKA_OFFSET),
            "--fresh",
            # A bare Raft log: raw values, no controller (it would refuse them).
            "--override",
            "metadata.log.raw.append.enable=true",
        )
        self.addresses = LocalCluster.load(self.directory).controller_addresses()

    def stop(self) -> None:
        if not os.path.exists(os.path.join(self.directory, "cluster.json")):
            return
        with contextlib.suppress(Exception):
            replog_cli("cluster", "stop", "--data-dir", self.directory, check=False)
        # Whatever survived the graceful stop: kill its process group.
        for node_dir in sorted(os.listdir(self.directory)):
            pid_path = os.path.join(self.directory, node_dir, "node.pid")
            with contextlib.suppress(OSError, ValueError):
                with open(pid_path, encoding="ascii") as f:
                    pid = int(f.read().strip())
                os.killpg(pid, signal.SIGKILL)

    def kill(self, node_id: int) -> None:
        # SIGKILL from here, not `replog cluster kill`: that command's Python start-up (0.5-0.8 s
        # here) would be timed as part of the failover.
        node = LocalCluster.load(self.directory).node(node_id)
        with open(node.pid_path, encoding="ascii") as f:
            os.killpg(int(f.read()), signal.SIGKILL)

    def restart(self, node_id: int) -> None:
        replog_cli("cluster", "restart", str(node_id), "--data-dir", self.directory)

    async def describe(self, timeout_s: float = 0.5) -> pb.DescribeQuorumResponse | None:
        """The leader's DescribeQuorum answer, or None when no node knows a live leader."""
        for address in self.addresses.values():
            try:
                async with grpc.aio.insecure_channel(address) as channel:
                    stub = raft_pb2_grpc.RaftQuorumStub(channel)  # type: ignore[no-untyped-call]
                    answer = await stub.DescribeQuorum(
                        pb.DescribeQuorumRequest(), timeout=timeout_s
                    )
            except grpc.RpcError:
                continue
            if answer.error_code == 0:
                return answer
        return None

    async def leader(self, timeout_s: float = 30.0) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            answer = await self.describe()
            if answer is not None and answer.leader_id >= 0:
                return int(answer.leader_id)
            await asyncio.sleep(0.05)
        raise RuntimeError("replog: no leader")

    async def run_trial(self, proposers: int, seconds: float) -> Trial:
        leader = await self.leader()
        async with grpc.aio.insecure_channel(self.addresses[leader]) as channel:
            stub = raft_pb2_grpc.MetadataLogStub(channel)  # type: ignore[no-untyped-call]

            async def propose(record: bytes) -> bool:
                try:
                    answer = await stub.Append(pb.AppendRequest(values=[record]), timeout=10)
                except grpc.RpcError:
                    return False
                return answer.error_code == 0

            await propose(b"warmup".ljust(RECORD_SIZE, b"x"))
            return await drive(propose, proposers, seconds)

    async def run_framed_trial(self, proposers: int, seconds: float) -> Trial:
        """The proposers' appends over one metadata append connection to the leader."""
        leader = await self.leader()
        async with await MetadataAppendClient.connect(self.addresses[leader]) as client:

            async def propose(record: bytes) -> bool:
                try:
                    await client.append([record], timeout_s=10)
                except ReplogError:
                    return False
                return True

            await propose(b"warmup".ljust(RECORD_SIZE, b"x"))
            return await drive(propose, proposers, seconds)

    async def failover_trial(self) -> float:
        """kill -9 the leader; seconds until a record proposed to a survivor commits."""
        await self.wait_caught_up()
        leader = await self.leader()
        survivors = [a for i, a in self.addresses.items() if i != leader]
        channels = [
            grpc.aio.insecure_channel(a, options=[("grpc.use_local_subchannel_pool", 1)])
            for a in survivors
        ]
        stubs = [raft_pb2_grpc.MetadataLogStub(c) for c in channels]  # type: ignore[no-untyped-call]
        record = b"failover".ljust(RECORD_SIZE, b"x")
        try:
            for channel in channels:  # connect before the kill so the clock measures the quorum
                await channel.channel_ready()
            killed_at = time.perf_counter()
            self.kill(leader)
            while time.perf_counter() - killed_at < 60:
                for stub in stubs:
                    try:
                        answer = await stub.Append(pb.AppendRequest(values=[record]), timeout=1.0)
                    except grpc.RpcError:
                        continue
                    if answer.error_code == 0:
                        return time.perf_counter() - killed_at
                await asyncio.sleep(0.01)
            raise RuntimeError("replog: no commit within 60 s of killing the leader")
        finally:
            for channel in channels:
                await channel.close()
            self.restart(leader)

    async def wait_caught_up(self, timeout_s: float = 30.0) -> None:
        """Until every voter has fetched up to the leader's log end offset."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            answer = await self.describe()
            if answer is not None and len(answer.voters) == 3:
                ends = [v.log_end_offset for v in answer.voters]
                if min(ends) >= 0 and min(ends) == max(ends):
                    return
            await asyncio.sleep(0.1)
        raise RuntimeError("replog: voters did not catch up")


# --- etcd ------------------------------------------------------------------------------------


class EtcdCluster(etcd_bench.EtcdCluster):
    """The 3 members of `replog.cli.bench.etcd`, driven by this benchmark's proposers."""

    async def run_trial(self, proposers: int, seconds: float) -> Trial:
        leader = self.leader_endpoint()
        async with grpc.aio.insecure_channel(leader) as channel:
            put = channel.unary_unary(
                etcd_bench.PUT_METHOD, request_serializer=None, response_deserializer=None
            )

            async def propose(record: bytes) -> bool:
                try:
                    await put(etcd_bench.encode_put(b"bench/" + record[:17], record), timeout=10)
                except grpc.RpcError:
                    return False
                return True

            await propose(b"warmup".ljust(RECORD_SIZE, b"x"))
            return await drive(propose, proposers, seconds)


class EmbeddedReplogCluster:
    """Three replog nodes whose proposers run inside the leader's process
    (`bench/embedded_proposers.py`), started afresh for every trial."""

    def __init__(self, directory: str, base_port: int) -> None:
        self.directory = directory
        self.base_port = base_port
        self.trials = 0

    async def run_trial(self, proposers: int, seconds: float) -> Trial:
        self.trials += 1
        directory = os.path.join(self.directory, f"trial-{self.trials}")
        cluster = LocalCluster.plan(directory, 3, self.base_port)
        cluster.write({"metadata.log.raw.append.enable": "true"})
        result_path = os.path.join(directory, "result.json")
        script = os.path.join(HERE, "embedded_proposers.py")
        processes = []
        for node in cluster.nodes:
            with open(node.log_path, "a", encoding="utf-8") as log:
                processes.append(
                    subprocess.Popen(
                        # -P: bench/ must not go first on sys.path (bench/timeline.py would
                        # shadow the timeline package).
                        [sys.executable, "-P", script, node.config_path, str(proposers),
                         str(seconds), result_path],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )  # fmt: skip
        try:
            deadline = time.monotonic() + seconds + 60
            while not os.path.exists(result_path):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"replog-embedded: no result in {directory}")
                await asyncio.sleep(0.1)
            with open(result_path, encoding="utf-8") as f:
                result = json.load(f)
        finally:
            for process in processes:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        return Trial(result["commits"], result["seconds"], result["latencies_s"], 0)


class NoOpAppendServer:
    """`bench/noop_append_server.py`: Append answered at once by a Python gRPC server. Its rate is
    the ceiling of any Python server taking one gRPC call per proposal here."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        script = os.path.join(HERE, "noop_append_server.py")
        self.process = subprocess.Popen(
            [sys.executable, "-P", script, str(self.port)], start_new_session=True
        )

    def stop(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    async def run_trial(self, proposers: int, seconds: float) -> Trial:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{self.port}") as channel:
            stub = raft_pb2_grpc.MetadataLogStub(channel)  # type: ignore[no-untyped-call]

            async def propose(record: bytes) -> bool:
                try:
                    await stub.Append(pb.AppendRequest(values=[record]), timeout=10)
                except grpc.RpcError:
                    return False
                return True

            await stub.Append(pb.AppendRequest(values=[b"warmup"]), timeout=30, wait_for_ready=True)
            return await drive(propose, proposers, seconds)


# --- main ------------------------------------------------------------------------------------


def port_free(port: int) -> bool:
    with socket.socket() as s:
        # SO_REUSEADDR: connections of a previous run in TIME_WAIT do not make the port busy
        # (the servers set it too); a listening socket still does.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def fmt_rate(value: float) -> str:
    return f"{value:,.0f}"


def table(
    results: dict[tuple[str, int], list[Trial]], names: list[str], proposer_counts: list[int]
) -> list[str]:
    """The summary table: one row per system and proposer count, with the ratio of its rate to
    the baseline's in the same run, or, without the baseline among `names`, a line saying so
    and no ratio column (module docstring)."""
    has_base = BASELINE in names
    ratio_header = f" {'ratio to ' + BASELINE:>14}" if has_base else ""
    lines = [] if has_base else [NO_BASELINE]
    per_trial_ratios = f"; ratio to {BASELINE} per trial (min / median / max)" if has_base else ""
    lines.append(
        f"{'system':{NAME_WIDTH}} {'proposers':>9} {'commits/s':>10} {'p50 ms':>8} {'p99 ms':>8}"
        f"{ratio_header}  commits/s per trial{per_trial_ratios}"
    )
    for proposers in proposer_counts:
        base = summarize(BASELINE, proposers, results[(BASELINE, proposers)]) if has_base else None
        for name in names:
            s = summarize(name, proposers, results[(name, proposers)])
            ratio = "" if base is None else f" {s.rate / base.rate:>13.2f}x"
            per_trial = ", ".join(fmt_rate(r) for r in s.rates)
            if base is not None:
                # Trial i of every system ran in the same round: its ratio is to that round's
                # etcd, under the same machine load.
                ratios = sorted(r / b for r, b in zip(s.rates, base.rates, strict=True))
                per_trial += (
                    f"; {ratios[0]:.2f} / {statistics.median(ratios):.2f} / {ratios[-1]:.2f}"
                )
            lines.append(
                f"{name:{NAME_WIDTH}} {proposers:>9} {fmt_rate(s.rate):>10} "
                f"{s.p50_ms:>8.2f} {s.p99_ms:>8.2f}{ratio}  {per_trial}"
            )
    return lines


def ports_of(systems: list[str], base_port: int, etcd_base_port: int) -> list[int]:
    """The loopback ports the selected systems listen on (a run checks that they are free)."""
    ports: list[int] = []
    if any(name in systems for name in REPLOG_CLUSTER):
        ports += [base_port + offset + i for offset in CLUSTER_OFFSETS for i in range(3)]
    if "embedded" in systems:
        ports += [base_port + EMBEDDED_OFFSET + i for i in range(3)]
    if "grpc-noop" in systems:
        ports.append(base_port + NOOP_OFFSET)
    if "etcd" in systems:
        ports += [etcd_base_port + 10 * i + j for i in range(3) for j in (0, 1)]
    return ports


def overlapping(ports: list[int]) -> list[int]:
    """The ports two servers of a run would both listen on."""
    return sorted({p for p in ports if ports.count(p) > 1})


async def run(
    args: argparse.Namespace,
    replog: ReplogCluster,
    etcd: EtcdCluster,
    embedded: EmbeddedReplogCluster,
    noop: NoOpAppendServer,
) -> None:
    results: dict[tuple[str, int], list[Trial]] = {}
    systems: list[tuple[str, Any]] = [
        ("etcd", etcd),
        ("replog", replog),
        ("replog-framed", SimpleNamespace(run_trial=lambda p, s: replog.run_framed_trial(p, s))),
        ("embedded", embedded),
        ("grpc-noop", noop),
    ]
    systems = [(name, system) for name, system in systems if name in args.systems]
    names = [name for name, _ in systems]
    for proposers in args.proposers:
        for trial in range(args.trials):
            for name, system in systems:
                result = await system.run_trial(proposers, args.seconds)
                results.setdefault((name, proposers), []).append(result)
                print(
                    f"  {name:{NAME_WIDTH}} P={proposers:<3} trial {trial + 1}: "
                    f"{fmt_rate(result.rate)}/s "
                    f"p50 {result.percentile_ms(0.5):.2f} ms "
                    f"p99 {result.percentile_ms(0.99):.2f} ms"
                    + (f" ({result.errors} errors)" if result.errors else ""),
                    flush=True,
                )

    print()
    for line in table(results, names, args.proposers):
        print(line)

    if args.failover_trials and "replog" in names:
        print()
        trials = args.failover_trials
        print(f"failover (replog, leader kill -9 -> first new commit), {trials} trials:")
        times = []
        for trial in range(args.failover_trials):
            elapsed = await replog.failover_trial()
            times.append(elapsed)
            print(f"  trial {trial + 1}: {elapsed:.3f} s", flush=True)
        print(
            f"failover p50 {statistics.median(times):.3f} s, "
            f"min {min(times):.3f} s, max {max(times):.3f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="length of one trial")
    parser.add_argument("--trials", type=int, default=3, help="trials per system and proposers")
    parser.add_argument("--proposers", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--failover-trials", type=int, default=10)
    parser.add_argument(
        "--base-port",
        type=int,
        default=REPLOG_BASE_PORT,
        help="replog's first node port (module docstring: the others above it)",
    )
    parser.add_argument("--etcd-base-port", type=int, default=ETCD_BASE_PORT)
    parser.add_argument("--quick", action="store_true", help="1 s trials, 1 of each, 2 failovers")
    parser.add_argument(
        "--systems",
        nargs="+",
        choices=SYSTEMS,
        default=list(SYSTEMS),
        help="systems to run (failover needs replog; ratios need etcd)",
    )
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.trials, args.failover_trials = 1.0, 1, 2

    ports = ports_of(args.systems, args.base_port, args.etcd_base_port)
    shared = overlapping(ports)
    if shared:
        raise SystemExit(
            f"--base-port {args.base_port} and --etcd-base-port {args.etcd_base_port} give two "
            f"servers the same ports {shared} (replog: base + 0-2, +10-12, +20, metrics +100, "
            "Kafka +200; etcd: base + 10 i and + 10 i + 1)"
        )
    busy = [p for p in ports if not port_free(p)]
    if busy:
        raise SystemExit(f"ports in use: {busy}")

    # etcd only when it runs: a run without it must not need it installed (nor its ports free).
    if BASELINE in args.systems:
        ensure_etcd()
        etcd_version = etcd_bench.etcd_version()
    else:
        etcd_version = "no etcd in this run"

    print(
        f"# {etcd_version}; "
        f"python {sys.version.split()[0]}; nproc {os.cpu_count()}; "
        f"{RECORD_SIZE} B records, {args.seconds:g} s x {args.trials} trials"
    )
    with tempfile.TemporaryDirectory(prefix="raft-commit-") as tmp:
        replog = ReplogCluster(os.path.join(tmp, "replog"), args.base_port)
        embedded = EmbeddedReplogCluster(
            os.path.join(tmp, "embedded"), args.base_port + EMBEDDED_OFFSET
        )
        noop = NoOpAppendServer(args.base_port + NOOP_OFFSET)
        etcd = EtcdCluster(tmp, args.etcd_base_port, token="raft-commit-bench")
        try:
            if "etcd" in args.systems:
                etcd.start()
            if any(name in args.systems for name in REPLOG_CLUSTER):
                replog.start()
            if "grpc-noop" in args.systems:
                noop.start()
            if "etcd" in args.systems:
                etcd.leader_endpoint()
            asyncio.run(run(args, replog, etcd, embedded, noop))
        finally:
            noop.stop()
            replog.stop()
            etcd.stop()


if __name__ == "__main__":
    main()
