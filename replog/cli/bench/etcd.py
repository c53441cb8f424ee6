"""etcd in the benchmarks: a 3-member cluster on loopback (Debian's etcd-server, which
bench/install_etcd.sh installs), and writes to it over gRPC with hand-encoded requests (no
etcd Python package needed). bench/raft_commit.py's quorum baseline and `replog bench`'s
`etcd` system (a metadata run's peer) both use it.

- `EtcdCluster`: member i listens for clients at base port + 10 i and for peers at base port
  + 10 i + 1, keeps its data and log in the directory given, and runs in a process group of
  its own (under `taskset -c` with `cpus`); `stop` ends every member, SIGKILL after 5 s.
- `encode_put` / `encode_txn_puts`: a PutRequest, and a TxnRequest whose success branch puts
  several keys at once (etcd's `--max-txn-ops`, 128 by default, bounds how many).

Rules: a member that does not start, or a cluster without a leader, is a `BenchSystemError`
naming the directory with the members' logs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from replog.errors import BenchSystemError

MEMBERS = 3
PUT_METHOD = "/etcdserverpb.KV/Put"
TXN_METHOD = "/etcdserverpb.KV/Txn"
TXN_OPS_MAX = 128  # etcd's --max-txn-ops default: the most puts one Txn may hold
LEADER_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 5.0


def install_script() -> str:
    """bench/install_etcd.sh of the checkout replog runs from."""
    return str(Path(__file__).resolve().parents[3] / "bench" / "install_etcd.sh")


def ensure_etcd() -> None:
    """Install etcd with bench/install_etcd.sh unless `etcd` and `etcdctl` are on PATH."""
    if shutil.which("etcd") and shutil.which("etcdctl"):
        return
    script = install_script()
    if not os.path.exists(script):
        raise BenchSystemError(f"etcd is not on PATH and {script} is not there to install it")
    subprocess.run(["bash", script], check=True)
    if not shutil.which("etcd"):
        raise BenchSystemError(f"etcd is not on PATH after {script}")


def etcd_version() -> str:
    done = subprocess.run(["etcd", "--version"], capture_output=True, text=True, check=True)
    return done.stdout.splitlines()[0]


def _field(number: int, data: bytes) -> bytes:
    """A length-delimited protobuf field: tag, varint length, bytes."""
    header = bytearray([number << 3 | 2])
    length = len(data)
    while length >= 0x80:
        header.append(length & 0x7F | 0x80)
        length >>= 7
    header.append(length)
    return bytes(header) + data


def encode_put(key: bytes, value: bytes) -> bytes:
    """PutRequest{key: 1, value: 2}."""
    return _field(1, key) + _field(2, value)


def encode_txn_puts(pairs: Sequence[tuple[bytes, bytes]]) -> bytes:
    """TxnRequest{success: 2} of one RequestOp{request_put: 2} per pair, no compare: every put
    commits together in one Raft entry."""
    if not 1 <= len(pairs) <= TXN_OPS_MAX:
        raise ValueError(f"a Txn holds 1 to {TXN_OPS_MAX} puts (etcd's default), not {len(pairs)}")
    return b"".join(_field(2, _field(2, encode_put(key, value))) for key, value in pairs)


class EtcdCluster:
    """Three etcd members on loopback (the module docstring)."""

    def __init__(
        self, directory: str, base_port: int, token: str = "replog-bench", cpus: str | None = None
    ) -> None:
        self.directory = directory
        self.token = token
        self.cpus = cpus
        self.processes: list[subprocess.Popen[bytes]] = []
        self.client_urls = [f"http://127.0.0.1:{base_port + 10 * i}" for i in range(MEMBERS)]
        self.peer_urls = [f"http://127.0.0.1:{base_port + 10 * i + 1}" for i in range(MEMBERS)]

    @property
    def endpoints(self) -> list[str]:
        return [url.removeprefix("http://") for url in self.client_urls]

    def start(self) -> None:
        os.makedirs(self.directory, exist_ok=True)
        initial = ",".join(f"m{i}={url}" for i, url in enumerate(self.peer_urls))
        pin = ["taskset", "-c", self.cpus] if self.cpus else []
        for i in range(MEMBERS):
            log = open(os.path.join(self.directory, f"m{i}.log"), "wb")  # noqa: SIM115
            self.processes.append(
                subprocess.Popen(
                    [
                        *pin,
                        "etcd",
                        "--name",
                        f"m{i}",
                        "--data-dir",
                        os.path.join(self.directory, f"m{i}.etcd"),
                        "--listen-client-urls",
                        self.client_urls[i],
                        "--advertise-client-urls",
                        self.client_urls[i],
                        "--listen-peer-urls",
                        self.peer_urls[i],
                        "--initial-advertise-peer-urls",
                        self.peer_urls[i],
                        "--initial-cluster",
                        initial,
                        "--initial-cluster-token",
                        self.token,
                        "--initial-cluster-state",
                        "new",
                        "--logger",
                        "zap",
                        "--log-level",
                        "warn",
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
            log.close()

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes if p.poll() is None]

    def stop(self) -> None:
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes = []

    def leader_endpoint(self, timeout_s: float = LEADER_TIMEOUT_S) -> str:
        """host:port of the member that leads (asked with `etcdctl endpoint status`)."""
        deadline = time.monotonic() + timeout_s
        endpoints = ",".join(self.endpoints)
        while time.monotonic() < deadline:
            result = subprocess.run(
                ["etcdctl", f"--endpoints={endpoints}", "endpoint", "status", "-w", "json"],
                capture_output=True,
                text=True,
                env={**os.environ, "ETCDCTL_API": "3"},
                check=False,
            )
            if result.returncode == 0:
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    for entry in json.loads(result.stdout):
                        status = entry["Status"]
                        if (
                            status.get("leader")
                            and status["header"]["member_id"] == status["leader"]
                        ):
                            return str(entry["Endpoint"]).removeprefix("http://")
            if any(p.poll() is not None for p in self.processes):
                break
            time.sleep(0.2)
        raise BenchSystemError(
            f"etcd: no leader among {endpoints} within {timeout_s:g} s (the members' logs: "
            f"{self.directory}/m*.log)"
        )


class EtcdSystem:
    """`replog bench --systems etcd`: a metadata run's peer (its admin processes write to the
    leader, `drivers`' `etcd` driver). etcd has no topics, partitions or leaders to kill: other
    workloads are refused before anything starts (`replog.cli.bench.run`), and a metadata run's
    keys stay until the system stops (its data is wiped at each start)."""

    name = "etcd"
    driver = "etcd"

    def __init__(self, directory: str, base_port: int, server_cpus: str | None = None) -> None:
        from replog.cli.bench.processes import PYTHON_WORKER

        self.program: Sequence[str] = PYTHON_WORKER
        self.directory = directory
        self.server_cpus = server_cpus
        self.bootstrap_servers = ""
        self._cluster = EtcdCluster(directory, base_port, cpus=server_cpus)
        self._version = ""

    def start(self) -> None:
        ensure_etcd()
        self._version = etcd_version()
        shutil.rmtree(self.directory, ignore_errors=True)
        self._cluster.start()
        try:
            self.bootstrap_servers = self._cluster.leader_endpoint()
        except BaseException:
            self._cluster.stop()
            raise

    def create_topics(self, names: Sequence[str], partitions: int) -> None:
        raise BenchSystemError("etcd: has no topics (it runs metadata workloads only)")

    def delete_topics(self, names: Sequence[str]) -> None:
        pass  # the class docstring: the keys go with the data directory

    def kill_leader(self, topic: str) -> int:
        raise BenchSystemError("etcd: has no partition leaders (it runs metadata workloads only)")

    def restart_killed(self) -> None:
        pass

    def stop(self) -> None:
        self._cluster.stop()

    def server_pids(self) -> list[int]:
        return self._cluster.pids()

    def describe(self) -> dict[str, str]:
        return {
            "system": self.name,
            "version": self._version,
            "nodes": f"{MEMBERS} members, loopback; writes to the leader",
            "client": "grpc (hand-encoded Put / Txn)",
            "server_cpus": self.server_cpus or "",
        }
