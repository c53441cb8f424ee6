"""Sequential round trips through a Kafka listener: what one request costs when a client waits
for each answer before sending the next (issue #56: Spark's Kafka source makes two ListOffsets
round trips per 500-record poll; issue #55: a consumer's catch-up, requests per second).

One connection to the leader of a one-partition topic (RF 3) holding a few 100-byte records;
per API, `--round-trips` requests sent one at a time (each the same pre-encoded frame with a new
correlation id, read back whole before the next is sent) after 200 unmeasured ones:

- ListOffsets v7, latest offset of the partition (Spark's connector asks earliest and latest
  after every poll);
- Metadata v12 for the topic;
- Fetch v12 of the partition from offset 0, no session, `max_wait_ms` 0: the few records;
- OffsetForLeaderEpoch v4, where epoch 0 of the partition ends (a consumer asks it after a
  leader change, to check its position; Spark's source does not).

`--apis` picks some of them (by name, comma-separated).

Per API it prints each round trip's median and p99 (client clock, `time.perf_counter_ns`)
and the leader process's CPU per round trip (/proc, less what it used idle over the second
before), for replog's listener and, with
`--apache-kafka`, for an Apache Kafka cluster (`bench/kafka/kafka.sh start`) holding the same
records; the systems alternate within each run (which goes first alternates too), and the
summary gives replog / Apache Kafka per run as min / median / max. The client is the same
plain blocking socket for both, so its own cost (about the same for both) sits in both figures.

    .venv/bin/python bench/kafka_roundtrip.py [--runs 3] [--round-trips 2000]
        [--base-port P] [--kafka-base-port K] [--data-dir DIR]
        [--apache-kafka HOST:PORT,... [--apache-kafka-pids P,P,P]]
        [--compare-checkout DIR] [--apis NAME,...] [--json FILE]

A replog cluster is started (`replog cluster start`, gRPC from `--base-port`, Kafka
listeners from `--kafka-base-port`) and stopped on exit; `--compare-checkout DIR` starts a
second one running DIR's code (e.g. `git archive main | tar -x -C DIR`), 10 ports above, measured
in the same runs. The summary gives every pair's ratio. The machine is shared: compare the
ratios within a run, not figures between runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

# bench/ first on sys.path would let bench/timeline.py shadow the package replog imports: the
# checkout goes first, bench/ last (for replog_cli).
_BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _BENCH_DIR]
sys.path.insert(0, os.path.dirname(_BENCH_DIR))
sys.path.append(_BENCH_DIR)

from kafka_listener_requests import _create_kafka_topic, spread  # noqa: E402
from replog_cli import create_topic, node_pids, running_cluster  # noqa: E402

from replog.cli.bench import versions  # noqa: E402
from replog.cli.bench.runner import machine  # noqa: E402
from replog.cli.bench.server_cpu import cpu_seconds  # noqa: E402
from replog.kafka.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic  # noqa: E402
from replog.kafka.messages.fetch_response import FetchResponse  # noqa: E402
from replog.kafka.messages.list_offsets_request import (  # noqa: E402
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from replog.kafka.messages.list_offsets_response import ListOffsetsResponse  # noqa: E402
from replog.kafka.messages.metadata_request import MetadataRequest, MetadataRequestTopic  # noqa: E402
from replog.kafka.messages.metadata_response import MetadataResponse  # noqa: E402
from replog.kafka.messages.offset_for_leader_epoch_request import (  # noqa: E402
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from replog.kafka.messages.offset_for_leader_epoch_response import (  # noqa: E402
    OffsetForLeaderEpochResponse,
)
from replog.kafka.messages.request_header import RequestHeader  # noqa: E402
from replog.kafka.protocol.codec import Message  # noqa: E402
from replog.kafka.protocol.framing import decode_response, encode_request  # noqa: E402

TOPIC = "roundtrip"
RECORDS = 5
RECORD_BYTES = 100
WARM_UP = 200
IDLE_S = 1.0  # the server's own CPU with no requests, measured before each trial
LATEST = -1
_SIZE = struct.Struct(">i")
_CORRELATION_AT = 8  # size prefix, api key, api version


@dataclass(frozen=True)
class Api:
    name: str
    key: int
    version: int
    body: Message

    def frame(self) -> bytes:
        header = RequestHeader(
            request_api_key=self.key,
            request_api_version=self.version,
            correlation_id=0,
            client_id="roundtrip",
        )
        return encode_request(header, self.body)


def apis(topic: str) -> list[Api]:
    return [
        Api(
            "ListOffsets",
            2,
            7,
            ListOffsetsRequest(
                replica_id=-1,
                topics=[
                    ListOffsetsTopic(
                        name=topic,
                        partitions=[ListOffsetsPartition(partition_index=0, timestamp=LATEST)],
                    )
                ],
            ),
        ),
        Api(
            "Metadata",
            3,
            12,
            MetadataRequest(
                topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
            ),
        ),
        Api(
            "Fetch",
            1,
            12,
            FetchRequest(
                max_wait_ms=0,
                min_bytes=1,
                max_bytes=1 << 20,
                topics=[
                    FetchTopic(
                        topic=topic,
                        partitions=[FetchPartition(partition=0, partition_max_bytes=1 << 20)],
                    )
                ],
            ),
        ),
        Api(
            "OffsetForLeaderEpoch",
            23,
            4,
            OffsetForLeaderEpochRequest(
                replica_id=-1,
                topics=[
                    OffsetForLeaderTopic(
                        topic=topic,
                        partitions=[OffsetForLeaderPartition(partition=0, leader_epoch=0)],
                    )
                ],
            ),
        ),
    ]


class Connection:
    """One blocking socket, one request at a time."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self._sock = socket.create_connection((host, int(port)), timeout=30)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation = 0

    def call(self, frame: bytearray) -> bytes:
        """Send `frame` (a request frame, its correlation id replaced) and read its answer."""
        self._correlation += 1
        _SIZE.pack_into(frame, _CORRELATION_AT, self._correlation)
        self._sock.sendall(frame)
        (size,) = _SIZE.unpack(self._read(4))
        answer = self._read(size)
        if _SIZE.unpack_from(answer)[0] != self._correlation:
            raise RuntimeError(f"answer to correlation id {self._correlation} out of order")
        return answer

    def _read(self, count: int) -> bytes:
        parts = []
        while count:
            part = self._sock.recv(count)
            if not part:
                raise RuntimeError("the server closed the connection")
            parts.append(part)
            count -= len(part)
        return b"".join(parts)

    def close(self) -> None:
        self._sock.close()


def leader(bootstrap: str, topic: str) -> tuple[int, str]:
    """(node id, host:port) of the leader of `topic`'s partition 0."""
    api = Api("Metadata", 3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)]))
    connection = Connection(bootstrap.split(",")[0])
    try:
        deadline = time.monotonic() + 30
        while True:
            _, body = decode_response(connection.call(bytearray(api.frame())), 3, 12)
            assert isinstance(body, MetadataResponse)
            (found,) = body.topics
            if found.error_code == 0 and found.partitions and found.partitions[0].leader_id >= 0:
                node = found.partitions[0].leader_id
                (broker,) = [b for b in body.brokers if b.node_id == node]
                return node, f"{broker.host}:{broker.port}"
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: no leader after 30 s ({found})")
            time.sleep(0.5)
    finally:
        connection.close()


def produce(bootstrap: str, topic: str) -> None:
    import confluent_kafka

    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 50}
    )
    for i in range(RECORDS):
        producer.produce(topic, os.urandom(RECORD_BYTES), key=str(i).encode())
    if producer.flush(30):
        raise RuntimeError(f"{topic}: records not acknowledged in 30 s")


@dataclass(frozen=True)
class Trial:
    system: str
    api: str
    run: int
    median_us: float
    p99_us: float
    cpu_us: float  # the leader process's CPU per round trip, less its idle rate
    load_average: float


@dataclass(frozen=True)
class System:
    name: str
    address: str  # the partition leader's listener
    pid: int | None  # the leader's process, for its CPU


def measure(system: System, api: Api, run: int, round_trips: int) -> Trial:
    connection = Connection(system.address)
    frame = bytearray(api.frame())
    try:
        first = connection.call(frame)
        _check(api, first)
        for _ in range(WARM_UP):
            connection.call(frame)
        pids = [system.pid] if system.pid is not None else []
        idle_cpu_s = _cpu_between(pids, lambda: time.sleep(IDLE_S)) / IDLE_S
        times: list[int] = []
        clock = time.perf_counter_ns

        def round_trips_timed() -> None:
            for _ in range(round_trips):
                started = clock()
                connection.call(frame)
                times.append(clock() - started)

        began = time.monotonic()
        cpu = _cpu_between(pids, round_trips_timed)
        cpu -= idle_cpu_s * (time.monotonic() - began)
    finally:
        connection.close()
    times.sort()
    return Trial(
        system=system.name,
        api=api.name,
        run=run,
        median_us=round(times[len(times) // 2] / 1000, 1),
        p99_us=round(times[int(len(times) * 0.99)] / 1000, 1),
        cpu_us=round(cpu / round_trips * 1e6, 1) if pids else 0.0,
        load_average=round(os.getloadavg()[0], 1),
    )


def _cpu_between(pids: Sequence[int], run: Callable[[], None]) -> float:
    """CPU seconds the processes `pids` used while `run` ran."""
    before = cpu_seconds(pids)
    run()
    after = cpu_seconds(pids)
    return sum(after[p] - before[p] for p in before.keys() & after.keys())


def _check(api: Api, answer: bytes) -> None:
    """The first answer decodes and carries no error (and the Fetch its records)."""
    _, body = decode_response(answer, api.key, api.version)
    if isinstance(body, ListOffsetsResponse):
        codes = [body.topics[0].partitions[0].error_code]
    elif isinstance(body, MetadataResponse):
        codes = [body.topics[0].error_code]
    elif isinstance(body, OffsetForLeaderEpochResponse):
        codes = [body.topics[0].partitions[0].error_code]
    else:
        assert isinstance(body, FetchResponse)
        fetched = body.responses[0].partitions[0]
        codes = [body.error_code, fetched.error_code]
        if len(fetched.records or b"") < RECORDS * RECORD_BYTES:
            raise RuntimeError(f"Fetch: {len(fetched.records or b'')} bytes of records")
    if any(codes):
        raise RuntimeError(f"{api.name}: error codes {codes} in the first answer: {body}")


def runs(
    systems: Sequence[System], all_apis: Sequence[Api], count: int, round_trips: int
) -> list[Trial]:
    trials = []
    for run in range(count):
        order = systems if run % 2 == 0 else list(reversed(systems))
        for api in all_apis:
            for system in order:
                trial = measure(system, api, run, round_trips)
                trials.append(trial)
                print(
                    f"run {run + 1} {system.name:>12s} {api.name:>20s}  median "
                    f"{trial.median_us:7.1f} us  p99 {trial.p99_us:7.1f} us  CPU "
                    f"{trial.cpu_us:6.1f} us per round trip  load {trial.load_average}",
                    flush=True,
                )
    return trials


def summary(trials: Sequence[Trial], names: Sequence[str], all_apis: Sequence[Api]) -> None:
    print()
    print("min / median / max over the runs")
    print(f"{'API':21s}{'system':>14s}{'median us':>30s}{'p99 us':>30s}{'CPU us/rt':>30s}")
    for api in all_apis:
        for name in names:
            mine = [t for t in trials if t.api == api.name and t.system == name]
            print(
                f"{api.name:21s}{name:>14s}"
                + "".join(
                    f"{spread([getattr(t, f) for t in mine]):>30s}"
                    for f in ("median_us", "p99_us", "cpu_us")
                )
            )
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            print()
            print(f"{first} / {second}, per run: min / median / max")
            for api in all_apis:
                print(
                    f"{api.name:21s}"
                    + "".join(
                        f"  {label} {_ratio(trials, api.name, field, first, second):>24s}"
                        for label, field in (
                            ("median", "median_us"),
                            ("p99", "p99_us"),
                            ("CPU", "cpu_us"),
                        )
                    )
                )


def _ratio(trials: Sequence[Trial], api: str, field: str, first: str, second: str) -> str:
    """`first`'s `field` over `second`'s, run by run, as min / median / max."""
    by_run: dict[int, dict[str, float]] = {}
    for t in trials:
        if t.api == api:
            by_run.setdefault(t.run, {})[t.system] = getattr(t, field)
    values = [r[first] / r[second] for r in by_run.values() if r.get(second) and first in r]
    return spread(values) + "x" if values else "-"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--round-trips", type=int, default=2000)
    parser.add_argument("--base-port", type=int, default=23600)
    parser.add_argument("--kafka-base-port", type=int, help="default: --base-port + 200")
    parser.add_argument("--data-dir", help="the cluster's directory (default: a temporary one)")
    parser.add_argument(
        "--apache-kafka", help="bootstrap servers of an Apache Kafka cluster to measure too"
    )
    parser.add_argument(
        "--apache-kafka-pids", default="", help="its node processes, node 1 first (for CPU)"
    )
    parser.add_argument(
        "--compare-checkout",
        metavar="DIR",
        help="also measure a cluster running the code of this checkout (another version: an "
        "A/B run), as `replog-<its directory name>`, at --base-port + 10",
    )
    parser.add_argument(
        "--apis",
        help="the APIs to measure, comma-separated (default: all): "
        + ",".join(api.name for api in apis(TOPIC)),
    )
    parser.add_argument("--json", help="write every trial here")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.round_trips < 1:
        parser.error("--runs and --round-trips are at least 1")
    kafka_base = args.kafka_base_port or args.base_port + 200
    topic = f"{TOPIC}-{int(time.time())}"  # fresh in a Kafka cluster measured before
    all_apis = apis(topic)
    if args.apis:
        wanted = args.apis.split(",")
        unknown = set(wanted) - {api.name for api in all_apis}
        if unknown:
            parser.error(f"--apis: no API named {', '.join(sorted(unknown))}")
        all_apis = [api for api in all_apis if api.name in wanted]
    systems: list[System] = []
    if args.apache_kafka:
        _create_kafka_topic(args.apache_kafka, topic, 1)
        produce(args.apache_kafka, topic)
        node, address = leader(args.apache_kafka, topic)
        pids = [int(p) for p in args.apache_kafka_pids.split(",") if p]
        systems.append(System("apache-kafka", address, _pid(pids, node)))
    with contextlib.ExitStack() as stack:
        work = stack.enter_context(tempfile.TemporaryDirectory(prefix="replog-bench-roundtrip-"))
        checkouts = [("replog", None)]
        if args.compare_checkout:
            name = os.path.basename(os.path.abspath(args.compare_checkout))
            checkouts.append((f"replog-{name}", os.path.abspath(args.compare_checkout)))
        for index, (name, checkout) in enumerate(checkouts):
            data_dir = os.path.join(args.data_dir or work, f"cluster-{index}")
            bootstrap = stack.enter_context(
                running_cluster(
                    data_dir,
                    args.base_port + 10 * index,
                    "--fresh",
                    kafka_base_port=kafka_base + 10 * index,
                    checkout=checkout,
                )
            )
            create_topic(bootstrap, topic, 1)
            produce(bootstrap, topic)
            node, address = leader(bootstrap, topic)
            systems.insert(index, System(name, address, _pid(node_pids(data_dir), node)))
        trials = runs(systems, all_apis, args.runs, args.round_trips)
    summary(trials, [s.name for s in systems], all_apis)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "trials": [asdict(t) for t in trials],
                    "args": vars(args),
                    "machine": machine(),
                    "versions": versions(),
                },
                f,
                indent=2,
            )
    return 0


def _pid(pids: Sequence[int], node: int) -> int | None:
    """Node `node`'s process (nodes are numbered from 1, `pids` node 1 first)."""
    return pids[node - 1] if 0 < node <= len(pids) else None


if __name__ == "__main__":
    sys.exit(main())
