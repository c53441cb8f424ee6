"""Real node processes on loopback for the cluster tests: the CLI, a proposer, a leader watch.

Everything here talks to nodes the way an operator or a client would: the `replog` command in
a subprocess, and gRPC (`MetadataLog.Append`, `MetadataLog.ReadCommitted`, `DescribeQuorum`).
Node processes are found by their command line (it names the test's data directory), so a
test that fails halfway still leaves nothing running (`LoopbackCluster.kill_everything`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Self
from unittest import mock

import grpc

from replog.admin.quorum import ask_each, describe_quorum
from replog.admin.quorum_description import QuorumDescription
from replog.cli.local_cluster import LocalCluster
from replog.cli.main import main
from replog.errors import ReplogError
from replog.pb import raft_pb2 as pb
from replog.pb import raft_pb2_grpc
from replog.record import iter_batches
from replog.wire.grpc_reconnect import CONNECTION_SETUP_TIMEOUT_MS
from tests.local_ports import KAFKA_PORT_OFFSET

# `cluster start` arguments for a bare Raft log: the nodes run no controller, and
# `MetadataLog.Append` takes raw values (the Raft-level tests append b"value-N").
RAW_LOG = ("--override", "metadata.log.raw.append.enable=true")
# Kafka's defaults, which the test clusters keep unless a test says otherwise.
ELECTION_TIMEOUT_MS = 1000
ELECTION_BACKOFF_MAX_MS = 1000
FETCH_TIMEOUT_MS = 2000
# The header of `quorum describe --replication`, as kafka-metadata-quorum.sh prints it.
REPLICATION_HEADER = [
    "NodeId",
    "LogEndOffset",
    "Lag",
    "LastFetchTimestamp",
    "LastCaughtUpTimestamp",
    "Status",
]
# Each channel its own connection, retried quickly: by default gRPC shares one connection per
# address between channels, and after the node was down it fails fast for up to 1 s and more.
# A connection attempt gets what replog's own channels give it (replog/wire/grpc_reconnect.py:
# gRPC's "min reconnect backoff" is that time, not a backoff).
CHANNEL_OPTIONS = [
    ("grpc.use_local_subchannel_pool", 1),
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", CONNECTION_SETUP_TIMEOUT_MS),
    ("grpc.max_reconnect_backoff_ms", 100),
]


def replog(
    *args: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run the `replog` command as a user would (a subprocess, `stdin` as its input); never
    raises on a non-zero exit."""
    return subprocess.run(
        [sys.executable, "-m", "replog.cli.main", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str


def replog_in_process(*args: str, stdin: str = "") -> Outcome:
    """Run `replog` in this process (fast; for commands that start no node), with `stdin` as
    its standard input; argparse's exits (usage: 2, `--help`: 0) become the return code.
    stdout is a text layer over bytes, as the real one is: commands may write to its buffer."""
    raw_out = io.BytesIO()
    out = io.TextIOWrapper(raw_out, encoding="utf-8", write_through=True)
    err = io.StringIO()
    with (
        mock.patch.object(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode()))),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            code = main(list(args))
        except SystemExit as exit_:  # argparse
            code = exit_.code if isinstance(exit_.code, int) else 1
    out.flush()
    return Outcome(code, raw_out.getvalue().decode(), err.getvalue())


@contextlib.contextmanager
def node_processes(
    tmp_path: Path,
    properties: Mapping[int, Mapping[str, str]],
    run_in: Callable[[int, list[str]], list[str]] = lambda node_id, argv: argv,
) -> Iterator[dict[int, Path]]:
    """One `replog node` process per node id, each configured by its properties (`log.dirs`
    is set to its directory's `data`), its output in its directory's `node.log`; yields node id
    -> directory, and SIGKILLs every process on the way out. `run_in(node_id, argv)`: the
    command line that runs `argv` where that node runs (by default, here), with `argv`'s
    process as the one started."""
    processes = []
    directories = {}
    try:
        for node_id, keys in properties.items():
            directory = directories[node_id] = tmp_path / f"node-{node_id}"
            directory.mkdir()
            config = directory / "server.properties"
            lines = [f"{k}={v}" for k, v in {**keys, "log.dirs": directory / "data"}.items()]
            config.write_text("\n".join([*lines, ""]))
            with (directory / "node.log").open("w") as log:
                processes.append(
                    subprocess.Popen(
                        run_in(
                            node_id,
                            [
                                sys.executable,
                                "-m",
                                "replog.cli.main",
                                "node",
                                "--config",
                                str(config),
                            ],
                        ),
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
        yield directories
    finally:
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        for process in processes:
            process.wait(timeout=10)


class JsonLines:
    """The JSON lines a process writes to `stream` (one object a line), read on a thread of
    their own as they come: `new()` gives those not taken yet, without waiting."""

    def __init__(self, stream: IO[str]) -> None:
        self._lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self._stream = stream
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self._stream:
            self._lines.put(json.loads(line))

    def new(self) -> list[dict[str, Any]]:
        taken = []
        while True:
            try:
                taken.append(self._lines.get_nowait())
            except queue.Empty:
                return taken


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


@dataclass
class LoopbackCluster:
    """A cluster directory under the test's tmp_path, driven through the CLI."""

    data_dir: Path
    base_port: int
    node_count: int = 3

    def cli(self, action: str, *args: str) -> subprocess.CompletedProcess[str]:
        return replog("cluster", action, "--data-dir", str(self.data_dir), *args)

    def ask(self, action: str, *args: str) -> Outcome:
        """A `replog cluster` command that starts nothing, run in this process."""
        return replog_in_process("cluster", action, "--data-dir", str(self.data_dir), *args)

    def start(self, *args: str, planned: bool = True) -> subprocess.CompletedProcess[str]:
        """`cluster start`; with `planned` False, the cluster written in `data_dir` as it is."""
        layout = (
            [
                "--nodes",
                str(self.node_count),
                "--base-port",
                str(self.base_port),
                "--kafka-base-port",
                str(self.base_port + KAFKA_PORT_OFFSET),
            ]
            if planned
            else []
        )
        result = self.cli("start", *layout, *args)
        assert result.returncode == 0, result.stderr
        return result

    @property
    def layout(self) -> LocalCluster:
        return LocalCluster.load(str(self.data_dir))

    @property
    def addresses(self) -> dict[int, str]:
        return self.layout.controller_addresses()

    def pid(self, node_id: int) -> int:
        return int(Path(self.layout.node(node_id).pid_path).read_text())

    def describe(self, timeout_s: float = 1.0) -> QuorumDescription:
        addresses = self.addresses
        return describe_quorum(list(addresses.values()), addresses, timeout_s)

    def leader(self, timeout_s: float = 1.0) -> QuorumDescription | None:
        """The quorum as its leader describes it; None while there is no leader."""
        try:
            return self.describe(timeout_s)
        except ReplogError:
            return None

    def wait_for_leader(self, after_epoch: int = 0, timeout_s: float = 15) -> QuorumDescription:
        """A leader of a quorum epoch after `after_epoch` that committed in its epoch."""

        def found() -> bool:
            leader = self.leader()
            return (
                leader is not None
                and leader.leader_epoch > after_epoch
                and leader.high_watermark is not None
            )

        wait_for(found, timeout_s, f"a leader in a quorum epoch after {after_epoch}")
        return self.describe()

    def signal(self, node_id: int, sig: signal.Signals) -> None:
        os.killpg(self.pid(node_id), sig)

    def running(self) -> set[int]:
        """The nodes whose process runs, by their pid files (a zombie does not run)."""
        return {n.node_id for n in self.layout.nodes if _running(Path(n.pid_path))}

    def kill(self, node_id: int) -> None:
        """SIGKILL a node; returns once its process is gone."""
        self.signal(node_id, signal.SIGKILL)
        wait_for(lambda: node_id not in self.running(), 10, f"node {node_id} to die")

    def restart(self, node_id: int) -> None:
        """Start a node that is not running (`replog cluster restart`: it waits until the node
        answers)."""
        result = self.cli("restart", str(node_id))
        assert result.returncode == 0, f"restart of node {node_id}: {result.stderr}"

    def node_pids(self) -> list[int]:
        """Every live process whose command line names this cluster's directory."""
        return list(self.node_commands())

    def node_commands(self) -> dict[int, list[bytes]]:
        """pid -> argv of every live process whose command line names this cluster's
        directory."""
        marker = str(self.data_dir).encode()
        commands = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes()
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker in argv and state != "Z":
                commands[int(entry)] = argv.split(b"\0")
        return commands

    def kill_everything(self) -> None:
        for pid in self.node_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)  # a stopped process dies only once continued
                os.killpg(pid, signal.SIGKILL)
        wait_for(lambda: not self.node_pids(), 10, "the cluster's processes to exit")


def _running(pid_file: Path) -> bool:
    try:
        stat = Path(f"/proc/{pid_file.read_text().strip()}/stat").read_text()
    except (OSError, ValueError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


# --- reading committed logs -------------------------------------------------------------------


@dataclass(frozen=True)
class CommittedLog:
    """A node's committed log as ReadCommitted returns it."""

    high_watermark: int
    raw: bytes  # every committed batch, as stored
    values: dict[int, bytes]  # offset -> value of every data record


def read_committed(address: str, timeout_s: float = 2.0) -> CommittedLog:
    chunks: list[bytes] = []
    values: dict[int, bytes] = {}
    with grpc.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        stub = raft_pb2_grpc.MetadataLogStub(channel)  # type: ignore[no-untyped-call]
        offset, high_watermark = 0, None
        while high_watermark is None or offset < high_watermark:
            answer = stub.ReadCommitted(
                pb.ReadCommittedRequest(start_offset=offset), timeout=timeout_s
            )
            assert answer.error_code == 0, answer.error_message
            # The high watermark of the first answer bounds the read: it may move meanwhile.
            high_watermark = answer.high_watermark if high_watermark is None else high_watermark
            if not answer.records:
                break
            for batch in iter_batches(answer.records, where=f"ReadCommitted from {address}"):
                if batch.base_offset >= high_watermark:
                    break
                chunks.append(batch.to_bytes())
                offset = batch.next_offset
                if not batch.is_control:
                    values.update((r.offset, r.value or b"") for r in batch)
    return CommittedLog(high_watermark, b"".join(chunks), values)


# --- a stream of proposals --------------------------------------------------------------------


class Background:
    """Runs `_run` in a daemon thread for the duration of a `with` block."""

    _stop: threading.Event
    _thread: threading.Thread

    def __enter__(self) -> Self:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=type(self).__name__, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class Ack:
    offset: int
    value: bytes
    quorum_epoch: int
    leader_id: int
    at: float  # time.monotonic() when the acknowledgement arrived


@dataclass
class Proposer(Background):
    """A client thread appending one unique value at a time, following the leader.

    A call that fails or times out is abandoned (its fate is unknown) and the next value goes
    to the leader the cluster names, or to the next node.
    """

    addresses: dict[int, str]
    call_timeout_s: float = 1.0
    acks: list[Ack] = field(default_factory=list)

    def _run(self) -> None:
        ids = sorted(self.addresses)
        channels = {
            i: grpc.insecure_channel(a, options=CHANNEL_OPTIONS) for i, a in self.addresses.items()
        }
        stubs = {
            i: raft_pb2_grpc.MetadataLogStub(c)  # type: ignore[no-untyped-call]
            for i, c in channels.items()
        }
        target = ids[0]
        sequence = 0
        try:
            while not self._stop.is_set():
                sequence += 1
                value = f"value-{sequence}".encode()
                try:
                    answer = stubs[target].Append(
                        pb.AppendRequest(values=[value]), timeout=self.call_timeout_s
                    )
                except grpc.RpcError:
                    target = ids[(ids.index(target) + 1) % len(ids)]
                    time.sleep(0.01)
                    continue
                if answer.error_code == 0:
                    self.acks.append(
                        Ack(
                            answer.base_offset,
                            value,
                            answer.quorum_epoch,
                            answer.leader_id,
                            time.monotonic(),
                        )
                    )
                    continue
                named = answer.leader_id
                if named in stubs and named != target:
                    target = named
                else:
                    target = ids[(ids.index(target) + 1) % len(ids)]
                    time.sleep(0.01)
        finally:
            for channel in channels.values():
                channel.close()

    def wait_for_acks(self, count: int, timeout_s: float = 10, **where: int) -> Ack:
        """The `count`-th ack matching `where` (e.g. quorum_epoch=3)."""

        def matching() -> list[Ack]:
            return [a for a in list(self.acks) if all(getattr(a, k) == v for k, v in where.items())]

        wait_for(lambda: len(matching()) >= count, timeout_s, f"{count} acks with {where}")
        return matching()[count - 1]

    def first_ack_after_epoch(self, epoch: int, timeout_s: float) -> Ack:
        wait_for(
            lambda: any(a.quorum_epoch > epoch for a in list(self.acks)),
            timeout_s,
            f"an ack in a quorum epoch after {epoch}",
        )
        return next(a for a in self.acks if a.quorum_epoch > epoch)


def wait_acks_committed(acks: list[Ack], address: str, node: str, timeout_s: float = 5) -> None:
    """Every acknowledged (offset, value) reaches the committed log at `address`, unchanged.

    A follower learns a commit from its leader's next Fetch answer, so its high watermark may
    lag the acknowledgement by a round trip (more when the leader lingers, docs/raft.md): an
    acknowledged entry not yet below it is waited for, an entry below it that differs is lost.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        log = read_committed(address)
        below = [a for a in acks if a.offset < log.high_watermark]
        assert_acks_committed(below, log, node)
        if len(below) == len(acks) or time.monotonic() > deadline:
            assert_acks_committed(acks, log, node)
            return
        time.sleep(0.02)


def assert_acks_committed(acks: list[Ack], log: CommittedLog, node: str) -> None:
    """Every acknowledged (offset, value) is in `log`, unchanged."""
    missing = [a for a in acks if log.values.get(a.offset) != a.value]
    assert not missing, (
        f"{len(missing)} of {len(acks)} acknowledged entries are missing or different on {node}"
        f" (high watermark {log.high_watermark}); first: {missing[0]}, found there: "
        f"{log.values.get(missing[0].offset)!r}"
    )


# --- watching who claims leadership -----------------------------------------------------------


@dataclass
class LeaderWatch(Background):
    """Polls every node's DescribeQuorum; a node that answers it claims leadership.

    Records, per quorum epoch, every node seen claiming it: split brain is two in one epoch.
    """

    addresses: dict[int, str]
    timeout_s: float = 0.3
    claims: dict[int, set[int]] = field(default_factory=dict)  # epoch -> node ids
    views: dict[int, tuple[int, int]] = field(default_factory=dict)  # node -> (epoch, leader)
    polls: int = 0

    def _run(self) -> None:
        by_address = {a: i for i, a in self.addresses.items()}
        while not self._stop.is_set():
            for address, answer in ask_each(self.addresses.values(), self.timeout_s).items():
                if not isinstance(answer, pb.DescribeQuorumResponse):
                    continue
                node_id = by_address[address]
                self.views[node_id] = (answer.quorum_epoch, answer.leader_id)
                if answer.error_code == 0:
                    self.claims.setdefault(answer.quorum_epoch, set()).add(node_id)
            self.polls += 1
            time.sleep(0.02)

    def leaders_after(self, epoch: int) -> dict[int, set[int]]:
        return {e: set(ids) for e, ids in list(self.claims.items()) if e > epoch}

    def assert_no_split_brain(self) -> None:
        split = {e: ids for e, ids in self.claims.items() if len(ids) > 1}
        assert not split, f"two leaders in one quorum epoch: {split}"
