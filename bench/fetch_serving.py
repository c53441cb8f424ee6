"""The nodes' CPU per row while a Spark task's fetcher reads a topic: what serving the Spark
source's fetches costs the cluster, outside Spark (issue #56).

Two 3-node clusters (`replog cluster start`, RF 3, 3 partitions, one leader per node): one runs
this tree's code, the other `--base COMMIT`'s (`git archive` into a temporary directory;
without `--base` only this tree's). The same records go to both (`--records` of
`--value-bytes`, as bench/spark_read.py writes them: 1 MB batches, 100 keys). Then `--passes`
passes per side, the sides taking turns (which goes first swapping each round): a pass reads
every partition from its log start to its high watermark with this tree's `PartitionFetcher`
(the Spark task's fetcher: a consumer's Fetch on the leader's Kafka listener, answers of up to
8 MiB, one fetch in flight; the answers are walked by batch framing, not decoded), one
partition after the other. Per pass it prints the nodes' CPU (user + system of every node
process, from /proc) per row, less their idle CPU (measured over `--idle-s` before each pass,
scaled to the pass's wall time), and the reader's own CPU per row. A pass reads the topic
`--repeat` times (the /proc figures tick every 10 ms: a pass must last).

Command: `python bench/fetch_serving.py --base e0bbb74 --records 2000000 --base-port 26000`
(ports P..P+2 and P+400..P+402, with their metrics (+100), Kafka (+200) and controllers'
Kafka (+300) ports; data under $TMPDIR).
`--keep` leaves the clusters running and prints their directories (for py-spy on a leader).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

_BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _BENCH_DIR]
sys.path.insert(0, os.path.dirname(_BENCH_DIR))

from replog.cli.local_cluster import LocalCluster  # noqa: E402
from replog.client.records import TopicPartition  # noqa: E402
from replog.client.sync_producer import Producer  # noqa: E402
from replog.clock import monotonic_ms  # noqa: E402
from replog.record.header import iter_frames, read_frame, read_header  # noqa: E402
from replog.spark.partition_fetcher import PartitionFetcher  # noqa: E402

ROOT = os.path.dirname(_BENCH_DIR)
PACKAGES = ("replog", "quorum", "timeline", "checkpoints")
NODES = 3
PARTITIONS = 3
TOPIC = "fetch-serving-bench"
KEYS = [b"key-%02d" % i for i in range(100)]
SETTINGS = {"max.partition.fetch.bytes": "8388608", "fetch.max.bytes": "67108864"}


class Side:
    """One cluster and the code it runs."""

    def __init__(self, name: str, code_root: str, directory: str, base_port: int) -> None:
        self.name = name
        self.code_root = code_root
        self.directory = directory
        self.base_port = base_port
        # The brokers' Kafka listeners (base port + 200): every client's way in.
        self.bootstrap = ",".join(f"127.0.0.1:{base_port + 200 + i}" for i in range(NODES))
        self.rows_per_pass = 0
        self.node_us: list[float] = []
        self.node_raw_us: list[float] = []
        self.reader_us: list[float] = []

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, PYTHONPATH=self.code_root)
        return subprocess.run(
            [sys.executable, "-m", "replog.cli.main", *args],
            capture_output=True, text=True, check=False, timeout=timeout,
            cwd=self.code_root, env=env,
        )  # fmt: skip

    def start(self) -> None:
        kafka_port = self.base_port + 200
        done = self.cli(
            "cluster", "start", "--nodes", str(NODES), "--data-dir", self.directory,
            "--base-port", str(self.base_port), "--kafka-base-port", str(kafka_port), "--fresh",
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"{self.name}: cluster start failed:\n{done.stdout}{done.stderr}")
        deadline = time.monotonic() + 60
        while True:
            done = self.cli(
                "topics", "create", "--topic", TOPIC, "--partitions", str(PARTITIONS),
                "--replication-factor", "3", "--config", "min.insync.replicas=2",
                "--bootstrap-server", self.bootstrap,
            )  # fmt: skip
            if done.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: topic: {done.stdout}{done.stderr}")
            time.sleep(0.5)

    def pids(self) -> list[int]:
        found = []
        for node in LocalCluster.load(self.directory).nodes:
            with contextlib.suppress(OSError, ValueError), open(node.pid_path) as f:
                found.append(int(f.read().strip()))
        return found

    def stop(self) -> None:
        pids = self.pids() if LocalCluster.exists(self.directory) else []
        with contextlib.suppress(Exception):
            self.cli("cluster", "stop", "--data-dir", self.directory, "--timeout", "10")
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, 9)


def produce(side: Side, records: int, value_bytes: int) -> None:
    values = os.urandom(records * value_bytes)
    settings = {
        "bootstrap.servers": side.bootstrap,
        "acks": "all",
        "linger.ms": 50,
        "batch.size": 1_000_000,
        "buffer.memory": 256 * 1024 * 1024,
    }
    now = int(time.time() * 1000)
    with Producer(settings) as producer:
        for i in range(records):
            value = values[i * value_bytes : (i + 1) * value_bytes]
            producer.send(TOPIC, value, KEYS[i % 100], None, i % PARTITIONS, now + i)
        producer.flush()


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU of `pids` and their threads so far."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def read_partition(fetcher: PartitionFetcher) -> int:
    """Every record of the fetcher's partition up to its high watermark; rows read."""
    start = fetcher.log_start_offset(30_000)
    end = fetcher.high_watermark(30_000)
    position, rows = start, 0
    while position < end:
        deadline = monotonic_ms() + 30_000
        answer = fetcher.wait(fetcher.submit(position, deadline), deadline)
        if answer is None:
            raise RuntimeError(f"no answer at offset {position}")
        records = answer.records
        last = None
        for at, _ in iter_frames(records):
            last = at
        if last is None:
            raise RuntimeError(f"no whole batch at offset {position}")
        base, _ = read_frame(records, last)
        after = base + read_header(records, last).last_offset_delta + 1
        rows += after - position
        position = after
    return rows


def one_pass(side: Side, idle_s: float, repeat: int = 1) -> None:
    pids = side.pids()
    idle_before = cpu_seconds(pids)
    time.sleep(idle_s)
    idle_rate = (cpu_seconds(pids) - idle_before) / idle_s
    nodes_before = cpu_seconds(pids)
    reader_before = time.process_time()
    wall = time.perf_counter()
    rows = 0
    for partition in list(range(PARTITIONS)) * repeat:
        fetcher = PartitionFetcher(TopicPartition(TOPIC, partition), dict(SETTINGS, **{
            "bootstrap.servers": side.bootstrap}))  # fmt: skip
        try:
            rows += read_partition(fetcher)
        finally:
            fetcher.close()
    wall = time.perf_counter() - wall
    reader = time.process_time() - reader_before
    nodes = cpu_seconds(pids) - nodes_before
    side.rows_per_pass = rows
    side.node_raw_us.append(nodes / rows * 1e6)
    side.node_us.append((nodes - idle_rate * wall) / rows * 1e6)
    side.reader_us.append(reader / rows * 1e6)
    print(
        f"  {side.name}: {rows} rows in {wall:.2f} s; nodes {side.node_us[-1]:.3f} us/row "
        f"({side.node_raw_us[-1]:.3f} with idle {idle_rate * 100:.1f}% of a core), reader "
        f"{side.reader_us[-1]:.3f} us/row; load {os.getloadavg()[0]:.1f}",
        flush=True,
    )


def spread(values: Sequence[float]) -> str:
    return f"{min(values):.3f} / {statistics.median(values):.3f} / {max(values):.3f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="a commit whose nodes serve the other cluster")
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--passes", type=int, default=4)
    parser.add_argument("--idle-s", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3, help="reads of the topic per pass")
    parser.add_argument("--base-port", type=int, default=26000)
    parser.add_argument("--keep", action="store_true", help="leave the clusters running")
    args = parser.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="fetch-serving-")
    sides = [Side("new", ROOT, os.path.join(workdir, "new"), args.base_port)]
    if args.base:
        base_root = os.path.join(workdir, "base-code")
        os.makedirs(base_root)
        archive = subprocess.run(
            ["git", "archive", args.base, *PACKAGES], cwd=ROOT, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", base_root], input=archive, check=True)
        subprocess.run([sys.executable, "-m", "compileall", "-q", *PACKAGES], cwd=base_root)
        sides.append(Side("base", base_root, os.path.join(workdir, "base"), args.base_port + 400))
    try:
        for side in sides:
            side.start()
            started = time.perf_counter()
            produce(side, args.records, args.value_bytes)
            print(f"{side.name}: {args.records} records in {time.perf_counter() - started:.1f} s")
        for round_ in range(args.passes):
            for side in sides if round_ % 2 == 0 else sides[::-1]:
                one_pass(side, args.idle_s, args.repeat)
        print(f"nodes' CPU per row less idle, us (min / median / max of {args.passes} passes):")
        for side in sides:
            print(
                f"  {side.name}: nodes {spread(side.node_us)} (raw {spread(side.node_raw_us)}); "
                f"reader {spread(side.reader_us)}"
            )
        if len(sides) == 2:
            new, base = sides
            ratio = statistics.median(new.node_us) / statistics.median(base.node_us)
            print(f"  nodes new / base by median: {ratio:.2f}")
        if args.keep:
            print("kept:", *(side.directory for side in sides))
            return 0
    finally:
        if not args.keep:
            for side in sides:
                side.stop()
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
