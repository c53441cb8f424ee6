"""replog's own client against Apache Kafka 4.x: does the same client work with Kafka itself?

Starts a 3-node Kafka KRaft cluster from Maven's jars (`bench/kafka/kafka.sh`, on ports of its
own and a data directory of its own), then runs one check per row with replog's client
(`replog.Producer`, `Consumer`, `Admin` and `replog.aio`'s), the `replog consumer-groups`
command and the Spark source (`format("replog")`), and prints the table:

    .venv/bin/python bench/kafka_client_check.py [--base-port 48092] [--data-dir DIR]
        [--only CHECK ...] [--record DIR] [--reuse] [--keep]

- produce: idempotent acks=all sends while the partition leader's broker is killed (kill -9)
  and restarted; every acknowledged record is in the log exactly once, in the order sent;
- consume: assigned partitions read from the start (blocking and asyncio);
- groups: two members of a classic group and two of a consumer-protocol group (KIP-848,
  `group.protocol=consumer`), and one asyncio member of each, read a topic once between them
  and commit; `replog consumer-groups` lists, describes and deletes the groups;
- admin: every call of `replog.Admin` (create / list / describe / delete topics, create
  partitions, describe cluster, describe and alter configs, list offsets, delete records,
  reassignments, preferred elections, describe quorum) and the asyncio Admin;
- spark: `spark.read.format("replog").option("bootstrap.servers", ...)` reads a Kafka topic.

What replog's client did is checked against Kafka's own view, read with confluent-kafka
(librdkafka), which also sets the checks up (topics, records): a check fails on what replog
did, not on the harness. Each check is a function; one that raises or outlasts its time limit
is a FAIL row naming why, and the script exits 1 if any row failed.

`--record DIR` puts a recording proxy (tests/kafka/recording_proxy.py) between replog's client
and Kafka and writes each check's exchanges to DIR/replog-<check>.json (the replay tests read
tests/kafka/recorded/); the leader kill's producer still talks to Kafka straight. `--reuse`
runs against the cluster kafka.sh already runs in `--data-dir` (and leaves it running);
`--keep` leaves a cluster it started running.

Bench only: it needs Java 17+ and the Kafka jars (kafka.sh fetches them with Maven once).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(1, str(ROOT))  # after bench/: tests.kafka's recording proxy

KAFKA_SCRIPT = ROOT / "bench" / "kafka" / "kafka.sh"
DEFAULT_BASE_PORT = 48092  # kafka.sh: brokers base..base+2, controllers base+100..
NODES = 3
CHECK_LIMIT_S = 240.0  # a check that has not ended by then is a FAIL row
RECORDS = 2000  # sent through the leader kill
GROUP_RECORDS = 300
PARTITIONS = 3
# Short client timeouts: a check waits seconds, not minutes, for a client that cannot cope.
CLIENT_TIMEOUTS = {
    "request.timeout.ms": 10_000,
    "default.api.timeout.ms": 30_000,
}
PRODUCER_TIMEOUTS = {"request.timeout.ms": 10_000, "max.block.ms": 30_000}


# --- Kafka --------------------------------------------------------------------------------------


@dataclass
class Kafka:
    """The cluster kafka.sh runs with these settings."""

    base_port: int
    data_dir: Path
    heap: str = "384m"

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.base_port + i}" for i in range(NODES))

    def script(self, *args: str, timeout_s: float = 300) -> str:
        env = {
            **os.environ,
            "KAFKA_BASE_PORT": str(self.base_port),
            "KAFKA_CLUSTER_DIR": str(self.data_dir),
            "KAFKA_HEAP": self.heap,
        }
        done = subprocess.run(
            [str(KAFKA_SCRIPT), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"kafka.sh {' '.join(args)} failed: {done.stderr.strip()[-800:]}")
        return done.stdout

    def running(self) -> bool:
        pids = [self.data_dir / f"node-{i}" / "node.pid" for i in range(1, NODES + 1)]
        return all(p.exists() and _alive(int(p.read_text().strip() or 0)) for p in pids)

    def kill(self, node: int) -> None:
        """kill -9 the node, and wait until its process is reaped: kafka.sh refuses to restart
        a node whose pid still answers kill -0, as a zombie's does."""
        pid = int((self.data_dir / f"node-{node}" / "node.pid").read_text().strip())
        self.script("kill", str(node))
        KafkaView.wait_for(lambda: not _exists(pid), f"node {node} (pid {pid}) to be reaped", 60)

    def restart(self, node: int) -> None:
        self.script("restart", str(node))


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, killed and not yet reaped, does not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def _led_at(address: str, topic: str) -> int:
    """How many of `topic`'s partitions have a leader in the Metadata of the broker at
    `address` alone (one Metadata v12 request on a socket of its own; 0 if it does not answer)."""
    import socket

    from replog.kafka.messages.metadata_request import MetadataRequest, MetadataRequestTopic
    from replog.kafka.messages.metadata_response import MetadataResponse
    from replog.kafka.messages.request_header import RequestHeader
    from replog.kafka.protocol import framing

    version = 12
    header = RequestHeader(
        request_api_key=MetadataRequest.API_KEY,
        request_api_version=version,
        correlation_id=1,
        client_id="kafka-client-check",
    )
    request = MetadataRequest(topics=[MetadataRequestTopic(name=topic)])
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(framing.encode_request(header, request))
            size = framing.frame_size(_receive(sock, 4))
            _, answer = framing.decode_response(
                _receive(sock, size), MetadataRequest.API_KEY, version
            )
    except OSError:
        return 0
    assert isinstance(answer, MetadataResponse)
    return sum(
        1
        for t in answer.topics
        if t.name == topic and t.error_code == 0
        for p in t.partitions
        if p.error_code == 0 and p.leader_id >= 0
    )


def _leads_all(address: str, topic: str, partitions: int) -> bool:
    return _led_at(address, topic) == partitions


def _receive(sock: Any, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data


class KafkaView:
    """Kafka's own view of the cluster, through confluent-kafka: sets checks up and checks
    what replog's client did."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap})

    def create_topic(
        self, name: str, partitions: int, configs: dict[str, str] | None = None
    ) -> None:
        from confluent_kafka.cimpl import NewTopic

        self.delete_topic(name)
        topic = NewTopic(
            name, partitions, 3, config={"min.insync.replicas": "2", **(configs or {})}
        )
        for future in self.admin.create_topics([topic]).values():
            future.result(60)
        self.wait_for(lambda: len(self.partitions(name)) == partitions, f"topic {name}'s leaders")
        for address in self.bootstrap.split(","):  # each broker, as any may be asked first
            self.wait_for(
                functools.partial(_leads_all, address, name, partitions),
                f"{address} to know topic {name}'s leaders",
            )

    def delete_topic(self, name: str) -> None:
        if name in self.topics():
            for future in self.admin.delete_topics([name]).values():
                future.result(60)
            self.wait_for(lambda: name not in self.topics(), f"topic {name} deleted")

    def topics(self) -> set[str]:
        return set(self.admin.list_topics(timeout=30).topics)

    def partitions(self, topic: str) -> dict[int, Any]:
        """Partition -> confluent's PartitionMetadata (leader, replicas, isrs)."""
        found = self.admin.list_topics(topic, timeout=30).topics.get(topic)
        if found is None or found.error is not None:
            return {}
        return {p: m for p, m in found.partitions.items() if m.leader >= 0}

    def partition(self, topic: str, partition: int) -> Any:
        """The partition's metadata once a broker names its leader (each answer comes from
        any broker, and one may learn of a new topic's partitions after another)."""
        found: list[Any] = []

        def named() -> bool:
            found[:] = [self.partitions(topic).get(partition)]
            return found[0] is not None

        self.wait_for(named, f"{topic}-{partition}'s leader")
        return found[0]

    def leader(self, topic: str, partition: int) -> int:
        return int(self.partition(topic, partition).leader)

    def produce(self, topic: str, values: Sequence[bytes], partitions: int) -> None:
        import confluent_kafka

        producer = confluent_kafka.Producer({"bootstrap.servers": self.bootstrap, "acks": "all"})
        for i, value in enumerate(values):
            producer.produce(topic, value, partition=i % partitions)
        if producer.flush(60) != 0:
            raise RuntimeError(f"harness: confluent-kafka could not write {topic} within 60 s")

    def read(self, topic: str, partition: int) -> list[tuple[int, bytes]]:
        """Every record of the partition up to its high watermark: (offset, value)."""
        import confluent_kafka

        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "kafka-client-check-reader",
                "enable.auto.commit": False,
            }
        )
        try:
            low, high = consumer.get_watermark_offsets(
                confluent_kafka.TopicPartition(topic, partition), timeout=30
            )
            consumer.assign([confluent_kafka.TopicPartition(topic, partition, low)])
            found: list[tuple[int, bytes]] = []
            deadline = time.monotonic() + 60
            while (not found or found[-1][0] < high - 1) and high > low:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"harness: read {len(found)} of {topic}-{partition} only")
                message = consumer.poll(1.0)
                if message is not None and message.error() is None:
                    found.append((message.offset() or 0, message.value() or b""))
            return found
        finally:
            consumer.close()

    def config(self, topic: str, name: str) -> str | None:
        from confluent_kafka.admin._config import ConfigResource  # where it is declared

        resource = ConfigResource("TOPIC", topic)
        entries = self.admin.describe_configs([resource])[resource].result(30)
        entry = entries.get(name)
        return None if entry is None else entry.value

    def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        import confluent_kafka

        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": "kafka-client-check-offsets"}
        )
        try:
            low, high = consumer.get_watermark_offsets(
                confluent_kafka.TopicPartition(topic, partition), timeout=30
            )
            return int(low), int(high)
        finally:
            consumer.close()

    def max_timestamp_offset(self, topic: str, partition: int) -> int:
        """Kafka's own answer to ListOffsets with MAX_TIMESTAMP (KIP-734)."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin._listoffsets import OffsetSpec  # where it is declared

        tp = TopicPartition(topic, partition)
        spec = OffsetSpec.max_timestamp()  # type: ignore[no-untyped-call]
        found = self.admin.list_offsets({tp: spec})[tp].result(30)
        return int(found.offset)

    def groups(self) -> set[str]:
        listed = self.admin.list_consumer_groups().result(30)
        return {g.group_id for g in listed.valid}

    @staticmethod
    def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                raise RuntimeError(f"harness: waited {timeout_s:.0f} s for {what}")
            time.sleep(0.2)


# --- checks -------------------------------------------------------------------------------------


@dataclass
class Context:
    kafka: Kafka
    view: KafkaView
    bootstrap: str  # what replog's client is given: Kafka's brokers, or the recording proxy
    notes: list[str] = field(default_factory=list)

    def client(self, **settings: Any) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap, **CLIENT_TIMEOUTS, **settings}


def check_produce_idempotent_through_leader_kill(ctx: Context) -> str:
    """acks=all and idempotence (the defaults) while the leader's broker is killed and
    restarted: every acknowledged record is in the log once, in the order sent."""
    import replog

    topic = "kc-produce"
    ctx.view.create_topic(topic, 1)
    leader = ctx.view.leader(topic, 0)
    values = [b"produce-%06d" % i for i in range(RECORDS)]
    futures: list[Any] = []
    # Straight to Kafka even with --record: a proxy cannot refuse connections the instant a
    # broker dies as the broker's own port does, and its replay would not be a leader kill.
    config = {"bootstrap.servers": ctx.view.bootstrap, **PRODUCER_TIMEOUTS, "linger.ms": 5}
    with replog.Producer(config) as producer:

        def send(upto: int) -> None:
            while len(futures) < upto:
                futures.append(producer.send(topic, values[len(futures)]))
                if len(futures) % 50 == 0:
                    time.sleep(0.02)  # ~2,500 records/s: the kill lands mid-stream

        send(RECORDS // 3)
        futures[-1].get(timeout=60)
        ctx.kafka.kill(leader)
        send(2 * RECORDS // 3)
        ctx.kafka.restart(leader)
        send(RECORDS)
        producer.flush(120)
    acked: list[tuple[bytes, Any]] = []
    failed: list[tuple[bytes, Any]] = []
    for value, future in zip(values, futures, strict=True):
        (acked if future.succeeded() else failed).append((value, future))
    log = [value for _, value in ctx.view.read(topic, 0)]
    return (
        _exactly_once_in_order(
            [v for v, _ in acked],
            log,
            f"{len(failed)} failed: {_first_error(failed)}" if failed else "",
        )
        + f"; broker {leader} (the leader) killed and restarted"
    )


def _first_error(failed: list[tuple[bytes, Any]]) -> str:
    exc = failed[0][1].exception
    return f"{type(exc).__name__}: {exc}"


def _exactly_once_in_order(acked: list[bytes], log: list[bytes], failures: str) -> str:
    if failures:
        raise AssertionError(f"{len(acked)} of {RECORDS} acknowledged; {failures}")
    seen: dict[bytes, int] = {}
    for value in log:
        seen[value] = seen.get(value, 0) + 1
    duplicated = [v for v, n in seen.items() if n > 1]
    missing = [v for v in acked if v not in seen]
    if missing or duplicated:
        raise AssertionError(
            f"{len(missing)} acknowledged records missing (first {missing[:1]}), "
            f"{len(duplicated)} duplicated (first {duplicated[:1]})"
        )
    in_log = [v for v in log if v in set(acked)]
    if in_log != acked:
        raise AssertionError("the acknowledged records are in the log out of their send order")
    return f"{len(acked)} acknowledged, each once and in order in Kafka's log of {len(log)}"


def check_produce_aio(ctx: Context) -> str:
    """replog.aio.Producer: each awaited send's offset is where Kafka has the record."""
    from replog import aio

    topic = "kc-produce-aio"
    ctx.view.create_topic(topic, 1)
    values = [b"aio-%04d" % i for i in range(200)]

    async def run() -> list[int]:
        config = {"bootstrap.servers": ctx.bootstrap, **PRODUCER_TIMEOUTS}
        async with aio.Producer(config) as producer:
            return [(await producer.send(topic, v)).offset for v in values]

    offsets = asyncio.run(run())
    log = ctx.view.read(topic, 0)
    if [(o, v) for o, v in zip(offsets, values, strict=True)] != log:
        raise AssertionError(f"offsets given {offsets[:3]}..., Kafka's log {log[:3]}...")
    return f"{len(values)} records at offsets 0-{offsets[-1]}, as Kafka's log has them"


def _filled_topic(ctx: Context, topic: str, count: int = GROUP_RECORDS) -> list[bytes]:
    values = [b"%s-%05d" % (topic.encode(), i) for i in range(count)]
    ctx.view.create_topic(topic, PARTITIONS)
    ctx.view.produce(topic, values, PARTITIONS)
    return values


def check_consume_assigned(ctx: Context) -> str:
    """replog.Consumer, assigned every partition, reads what Kafka has, in offset order."""
    import replog

    topic = "kc-consume"
    values = _filled_topic(ctx, topic)
    got: dict[int, list[tuple[int, bytes]]] = {}
    with replog.Consumer(**_kw(ctx.client(auto_offset_reset="earliest"))) as consumer:
        consumer.assign([replog.TopicPartition(topic, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        while sum(map(len, got.values())) < len(values) and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=1000).items():
                got.setdefault(tp.partition, []).extend((r.offset, r.value or b"") for r in records)
    for p in range(PARTITIONS):
        if got.get(p, []) != ctx.view.read(topic, p):
            raise AssertionError(f"partition {p}: read {len(got.get(p, []))} records, not Kafka's")
    return f"{len(values)} records of {PARTITIONS} partitions, as Kafka has them"


def _kw(config: dict[str, Any]) -> dict[str, Any]:
    """Kafka's dotted names as keyword arguments (replog's clients take both spellings)."""
    return {k.replace(".", "_"): v for k, v in config.items()}


def check_consume_aio(ctx: Context) -> str:
    """replog.aio.Consumer, assigned: the same records Kafka has."""
    from replog import aio

    topic = "kc-consume-aio"
    values = _filled_topic(ctx, topic)

    async def run() -> list[bytes]:
        got: list[bytes] = []
        async with aio.Consumer(**_kw(ctx.client(auto_offset_reset="earliest"))) as consumer:
            consumer.assign([aio.TopicPartition(topic, p) for p in range(PARTITIONS)])
            deadline = time.monotonic() + 60
            while len(got) < len(values) and time.monotonic() < deadline:
                for records in (await consumer.poll(timeout_ms=1000)).values():
                    got.extend(r.value or b"" for r in records)
        return got

    got = asyncio.run(run())
    if sorted(got) != sorted(values):
        raise AssertionError(f"read {len(got)} records, not the {len(values)} Kafka has")
    return f"{len(got)} records"


def _group_members(ctx: Context, protocol: str, members: int) -> str:
    """`members` blocking consumers of one group, each in a thread, join; once each owns
    partitions the topic is written, and they read it between them, each record once, and
    commit (written only then, so that no rebalance falls in the reading: a record read again
    after one would be Kafka's at-least-once, not an error)."""
    import replog

    topic = group = f"kc-group-{protocol}"
    values = [b"%s-%05d" % (topic.encode(), i) for i in range(GROUP_RECORDS)]
    ctx.view.create_topic(topic, PARTITIONS)
    got: list[list[bytes]] = [[] for _ in range(members)]
    owned: list[set[Any]] = [set() for _ in range(members)]
    errors: list[BaseException] = []
    stop = threading.Event()

    def member(i: int) -> None:
        settings = ctx.client(group_id=group, group_protocol=protocol, auto_offset_reset="earliest")
        settings["enable.auto.commit"] = False
        try:
            with replog.Consumer(topic, **_kw(settings)) as consumer:
                deadline = time.monotonic() + 120
                while not stop.is_set() and time.monotonic() < deadline:
                    for records in consumer.poll(timeout_ms=500).values():
                        got[i].extend(r.value or b"" for r in records)
                    owned[i] = set(consumer.assignment())
                    consumer.commit()
                    if sum(map(len, got)) >= len(values):
                        stop.set()
                consumer.commit()
        except BaseException as exc:  # reported in the row
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(members)]
    for thread in threads:
        thread.start()
    KafkaView.wait_for(
        lambda: bool(errors) or (all(owned) and sum(map(len, owned)) == PARTITIONS),
        f"the {members} members to own the topic's {PARTITIONS} partitions between them",
    )
    if not errors:
        ctx.view.produce(topic, values, PARTITIONS)
    for thread in threads:
        thread.join(150)
    if errors:
        raise errors[0]
    everything = sorted(v for vs in got for v in vs)
    if everything != sorted(values):
        raise AssertionError(
            f"the members read {len(everything)} records ({len(set(everything))} distinct), "
            f"not the {len(values)} of the topic once"
        )
    shares = [sorted(tp.partition for tp in o) for o in owned]
    return f"{members} members owned partitions {shares}, read {[len(g) for g in got]}, each once"


def check_group_classic(ctx: Context) -> str:
    """Two members of a classic group (JoinGroup / SyncGroup / Heartbeat)."""
    return _group_members(ctx, "classic", 2)


def check_group_consumer_protocol(ctx: Context) -> str:
    """Two members of a consumer-protocol group (KIP-848: ConsumerGroupHeartbeat)."""
    return _group_members(ctx, "consumer", 2)


def check_group_aio(ctx: Context) -> str:
    """One replog.aio.Consumer member of each protocol's group reads the topic and commits."""
    return "read and committed: " + ", ".join(
        f"{protocol} {_aio_member(ctx, protocol)}" for protocol in ("classic", "consumer")
    )


def _aio_member(ctx: Context, protocol: str) -> int:
    from replog import aio

    topic = group = f"kc-group-aio-{protocol}"
    values = _filled_topic(ctx, topic)

    async def run() -> int:
        settings = ctx.client(group_id=group, group_protocol=protocol, auto_offset_reset="earliest")
        got = 0
        async with aio.Consumer(topic, **_kw(settings)) as consumer:
            deadline = time.monotonic() + 90
            while got < len(values) and time.monotonic() < deadline:
                got += sum(map(len, (await consumer.poll(timeout_ms=500)).values()))
            await consumer.commit()
        return got

    got = asyncio.run(run())
    if got != len(values):
        raise AssertionError(f"{protocol}: read {got} records, not {len(values)}")
    return got


def _replog(*args: str) -> str:
    """A `replog` command of this checkout, against Kafka."""
    done = subprocess.run(
        [sys.executable, "-m", "replog", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"replog {' '.join(args[:2])} exited {done.returncode}: {done.stderr.strip()[-400:]}"
        )
    return done.stdout


def check_cli_consumer_groups(ctx: Context) -> str:
    """`replog consumer-groups --list / --describe / --delete` on the groups of the checks
    above (or one made here if they did not run)."""
    group = "kc-group-classic"
    if group not in ctx.view.groups():
        _group_members(ctx, "classic", 1)
    listed = _replog("consumer-groups", "--list", "--bootstrap-server", ctx.bootstrap)
    if group not in listed.split():
        raise AssertionError(f"--list did not name {group}: {listed.strip()[:200]}")
    described = _replog(
        "consumer-groups", "--describe", "--group", group, "--bootstrap-server", ctx.bootstrap
    )
    if group not in described or "LAG" not in described:
        raise AssertionError(f"--describe printed: {described.strip()[:300]}")
    _replog("consumer-groups", "--delete", "--group", group, "--bootstrap-server", ctx.bootstrap)
    KafkaView.wait_for(lambda: group not in ctx.view.groups(), f"group {group} gone from Kafka")
    return "--list, --describe and --delete, as Kafka's own list agrees"


# --- admin ----------------------------------------------------------------------------------------


@contextlib.contextmanager
def _admin(ctx: Context) -> Iterator[Any]:
    import replog

    with replog.Admin(**_kw(ctx.client())) as admin:
        yield admin


def check_admin_create_topics(ctx: Context) -> str:
    import replog

    topic = "kc-admin-created"
    ctx.view.delete_topic(topic)
    with _admin(ctx) as admin:
        admin.create_topics([replog.NewTopic(topic, 2, 3, configs={"min.insync.replicas": "2"})])
    KafkaView.wait_for(lambda: len(ctx.view.partitions(topic)) == 2, f"{topic} at Kafka")
    if ctx.view.config(topic, "min.insync.replicas") != "2":
        raise AssertionError("Kafka does not have the topic's min.insync.replicas=2")
    return "2 partitions, RF 3, min.insync.replicas=2, as Kafka describes it"


def check_admin_list_and_describe_topics(ctx: Context) -> str:
    topic = "kc-admin-topic"
    ctx.view.create_topic(topic, PARTITIONS)
    with _admin(ctx) as admin:
        names = admin.list_topics()
        described = admin.describe_topics([topic])[topic]
    if topic not in names or "__consumer_offsets" in names:
        raise AssertionError(f"list_topics gave {names}")
    kafka_side = ctx.view.partitions(topic)
    for p in described.partitions:
        theirs = kafka_side[p.partition]
        if (p.leader, sorted(p.replicas)) != (theirs.leader, sorted(theirs.replicas)):
            raise AssertionError(f"partition {p.partition}: {p}, Kafka says {theirs}")
    return f"{len(names)} topics listed; {topic}'s leaders and replicas as Kafka's"


def check_admin_create_partitions(ctx: Context) -> str:
    topic = "kc-admin-grow"
    ctx.view.create_topic(topic, 1)
    with _admin(ctx) as admin:
        admin.create_partitions({topic: 3})
    KafkaView.wait_for(lambda: len(ctx.view.partitions(topic)) == 3, f"{topic} at 3 partitions")
    return "1 -> 3 partitions, as Kafka has them"


def check_admin_describe_cluster(ctx: Context) -> str:
    with _admin(ctx) as admin:
        cluster = admin.describe_cluster()
    ids = sorted(b.broker_id for b in cluster.brokers)
    if ids != list(range(1, NODES + 1)) or not cluster.cluster_id:
        raise AssertionError(f"{cluster}")
    return f"cluster {cluster.cluster_id}, brokers {ids}, controller {cluster.controller_id}"


def check_admin_configs(ctx: Context) -> str:
    """describe_configs (a topic, a broker) and incremental_alter_configs (set, then delete)."""
    import replog

    topic = "kc-admin-configs"
    ctx.view.create_topic(topic, 1)
    resource = replog.ConfigResource(replog.ConfigResourceType.TOPIC, topic)
    broker = replog.ConfigResource(replog.ConfigResourceType.BROKER, "1")
    with _admin(ctx) as admin:
        described = admin.describe_configs([resource, broker])
        topic_entries = {e.name: e.value for e in described[resource].entries}
        broker_entries = {e.name: e.value for e in described[broker].entries}
        if topic_entries.get("min.insync.replicas") != "2" or "log.dirs" not in broker_entries:
            raise AssertionError("describe_configs lacks min.insync.replicas=2 or log.dirs")
        admin.incremental_alter_configs({resource: {"retention.ms": "3600000"}})
        _kafka_shows(ctx, topic, "retention.ms", "3600000")
        admin.incremental_alter_configs({resource: {"retention.ms": None}})
        _kafka_shows(ctx, topic, "retention.ms", "604800000")  # Kafka's default
    return f"{len(topic_entries)} topic and {len(broker_entries)} broker configs; set and reset"


def _kafka_shows(ctx: Context, topic: str, name: str, value: str) -> None:
    """Wait until Kafka describes the topic's config so (a change reaches each broker through
    the metadata log, a moment after the controller took it)."""
    seen: list[str | None] = []

    def shows() -> bool:
        seen[:] = [ctx.view.config(topic, name)]
        return seen[0] == value

    try:
        KafkaView.wait_for(shows, f"Kafka's {name} of {topic} to be {value}", 30)
    except RuntimeError:
        raise AssertionError(f"Kafka's {name} of {topic} is {seen[0]}, not {value}") from None


def check_admin_list_offsets_and_delete_records(ctx: Context) -> str:
    import replog

    topic = "kc-admin-offsets"
    _filled_topic(ctx, topic, 30)
    tp = replog.TopicPartition(topic, 0)
    with _admin(ctx) as admin:
        before = (
            admin.list_offsets({tp: replog.OffsetSpec.EARLIEST}),
            admin.list_offsets({tp: replog.OffsetSpec.LATEST}),
        )
        low = admin.delete_records({tp: 4})[tp]
        after = admin.list_offsets({tp: replog.OffsetSpec.EARLIEST})[tp]
        newest = admin.list_offsets({tp: replog.OffsetSpec.MAX_TIMESTAMP})[tp]
    earliest, latest = before[0][tp], before[1][tp]
    kafka_low, kafka_high = ctx.view.offsets(topic, 0)
    if (earliest and earliest.offset, latest and latest.offset) != (0, 10) or low != 4:
        raise AssertionError(f"earliest {earliest}, latest {latest}, low watermark {low}")
    kafka_newest = ctx.view.max_timestamp_offset(topic, 0)
    if (after and after.offset) != 4 or kafka_low != 4:
        raise AssertionError(f"after delete: earliest {after}, Kafka's low {kafka_low}")
    if (newest and newest.offset) != kafka_newest:
        raise AssertionError(f"max-timestamp: {newest}; Kafka's own answer: {kafka_newest}")
    return (
        f"earliest 0, latest {kafka_high}, max-timestamp {kafka_newest}; deleted before 4, "
        "as Kafka has it"
    )


def check_admin_reassign_and_elect(ctx: Context) -> str:
    """Move a partition to a replica order led by another broker, list the reassignment,
    elect the preferred leader: Kafka's leader is then the first replica."""
    import replog

    topic = "kc-admin-reassign"
    ctx.view.create_topic(topic, 1)
    tp = replog.TopicPartition(topic, 0)
    current = ctx.view.partition(topic, 0)
    wanted = [r for r in current.replicas if r != current.leader] + [current.leader]
    with _admin(ctx) as admin:
        admin.alter_partition_reassignments({tp: wanted})
        ongoing = admin.list_partition_reassignments()
        KafkaView.wait_for(
            lambda: list(ctx.view.partition(topic, 0).replicas) == wanted, "the new replicas"
        )
        results = admin.elect_leaders("preferred", [tp])
    KafkaView.wait_for(lambda: ctx.view.leader(topic, 0) == wanted[0], "the preferred leader")
    errors = [r.error for r in results if r.error is not None]
    return (
        f"replicas {list(current.replicas)} -> {wanted} ({len(ongoing)} listed in progress), "
        f"leader {current.leader} -> {wanted[0]}" + (f" ({errors[0]})" if errors else "")
    )


def check_admin_describe_quorum(ctx: Context) -> str:
    with _admin(ctx) as admin:
        quorum = admin.describe_quorum()
    if sorted(quorum.voters) != list(range(1, NODES + 1)) or quorum.leader_id not in quorum.voters:
        raise AssertionError(f"{quorum}")
    return f"leader {quorum.leader_id}, epoch {quorum.leader_epoch}, voters {list(quorum.voters)}"


def check_admin_delete_topics(ctx: Context) -> str:
    topic = "kc-admin-deleted"
    ctx.view.create_topic(topic, 1)
    with _admin(ctx) as admin:
        admin.delete_topics([topic])
    KafkaView.wait_for(lambda: topic not in ctx.view.topics(), f"{topic} gone from Kafka")
    return "gone from Kafka's metadata"


def check_admin_aio(ctx: Context) -> str:
    """replog.aio.Admin: describe_cluster and list_topics."""
    from replog import aio

    async def run() -> tuple[Any, list[str]]:
        async with aio.Admin(**_kw(ctx.client())) as admin:
            return await admin.describe_cluster(), await admin.list_topics()

    cluster, names = asyncio.run(run())
    if len(cluster.brokers) != NODES:
        raise AssertionError(f"{cluster}")
    return f"{len(cluster.brokers)} brokers, {len(names)} topics"


# --- Spark ----------------------------------------------------------------------------------------


def check_spark_reads_a_kafka_topic(ctx: Context) -> str:
    """`spark.read.format("replog")` with Kafka's bootstrap servers reads a Kafka topic: every
    record once, with its partition and offset."""
    import replog.spark
    from replog.spark.local_session import local_session

    topic = "kc-spark"
    values = _filled_topic(ctx, topic, 1000)
    # Spark's Python workers: this interpreter (else python3 on PATH, without replog).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = local_session("kafka-client-check", scratch_dir=str(ctx.kafka.data_dir / "spark"))
    replog.spark.register(spark)
    rows = (
        spark.read.format("replog")
        .option("bootstrap.servers", ctx.bootstrap)
        .option("subscribe", topic)
        .load()
        .select("partition", "offset", "value")
        .collect()
    )
    got = sorted(bytes(r["value"]) for r in rows)
    if got != sorted(values):
        raise AssertionError(f"{len(got)} rows ({len(set(got))} distinct), not {len(values)}")
    for p in range(PARTITIONS):
        mine = sorted((r["offset"], bytes(r["value"])) for r in rows if r["partition"] == p)
        if mine != ctx.view.read(topic, p):
            raise AssertionError(f"partition {p}'s rows differ from Kafka's records")
    return f"{len(rows)} rows of {PARTITIONS} partitions, as Kafka has them"


@dataclass(frozen=True)
class Check:
    name: str
    run: Callable[[Context], str]


CHECKS = (
    Check("produce-idempotent-leader-kill", check_produce_idempotent_through_leader_kill),
    Check("produce-aio", check_produce_aio),
    Check("consume-assigned", check_consume_assigned),
    Check("consume-aio", check_consume_aio),
    Check("group-classic", check_group_classic),
    Check("group-consumer-protocol", check_group_consumer_protocol),
    Check("group-aio", check_group_aio),
    Check("cli-consumer-groups", check_cli_consumer_groups),
    Check("admin-create-topics", check_admin_create_topics),
    Check("admin-list-describe-topics", check_admin_list_and_describe_topics),
    Check("admin-create-partitions", check_admin_create_partitions),
    Check("admin-describe-cluster", check_admin_describe_cluster),
    Check("admin-configs", check_admin_configs),
    Check("admin-offsets-delete-records", check_admin_list_offsets_and_delete_records),
    Check("admin-reassign-elect", check_admin_reassign_and_elect),
    Check("admin-describe-quorum", check_admin_describe_quorum),
    Check("admin-delete-topics", check_admin_delete_topics),
    Check("admin-aio", check_admin_aio),
    Check("spark-read", check_spark_reads_a_kafka_topic),
)


# --- running ------------------------------------------------------------------------------------


@dataclass
class Row:
    name: str
    ok: bool
    said: str
    seconds: float


def run_check(check: Check, ctx: Context, limit_s: float) -> Row:
    """The check in a daemon thread: a check that hangs past `limit_s` is a FAIL row (and its
    thread is left behind; the process exits at the end)."""
    outcome: list[tuple[bool, str]] = []

    def body() -> None:
        try:
            outcome.append((True, check.run(ctx)))
        except BaseException as exc:  # every failure is a row
            where = traceback.extract_tb(exc.__traceback__)[-1]
            place = f" ({Path(where.filename).name}:{where.lineno})"
            outcome.append((False, f"{type(exc).__name__}: {exc}{place}"))

    started = time.monotonic()
    thread = threading.Thread(target=body, name=check.name, daemon=True)
    thread.start()
    thread.join(limit_s)
    seconds = time.monotonic() - started
    if not outcome:
        return Row(check.name, False, f"did not finish within {limit_s:.0f} s", seconds)
    ok, said = outcome[0]
    return Row(check.name, ok, said, seconds)


def table(rows: Sequence[Row]) -> str:
    lines = ["| check | result | s | detail |", "| --- | --- | --- | --- |"]
    for row in rows:
        said = " ".join(row.said.split()).replace("|", "\\|")
        lines.append(f"| {row.name} | {'ok' if row.ok else 'FAIL'} | {row.seconds:.1f} | {said} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT)
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/replog-kafka-client-check"))
    parser.add_argument("--only", action="append", choices=[c.name for c in CHECKS])
    parser.add_argument("--record", type=Path, metavar="DIR")
    parser.add_argument("--reuse", action="store_true", help="use the cluster kafka.sh runs")
    parser.add_argument("--keep", action="store_true", help="leave the cluster running")
    parser.add_argument("--limit", type=float, default=CHECK_LIMIT_S, help="seconds per check")
    args = parser.parse_args(argv)
    kafka = Kafka(args.base_port, args.data_dir)
    if args.reuse:
        if not kafka.running():
            parser.error(f"--reuse: kafka.sh runs no cluster in {args.data_dir}")
    else:
        print(f"starting Apache Kafka (3 nodes) on {kafka.bootstrap}", file=sys.stderr)
        kafka.script("start")
    proxy = None
    rows: list[Row] = []
    try:
        view = KafkaView(kafka.bootstrap)
        bootstrap = kafka.bootstrap
        if args.record is not None:
            from tests.kafka.recording_proxy import RecordingProxy

            proxy = RecordingProxy(kafka.bootstrap.split(","))
            bootstrap = proxy.bootstrap
        ctx = Context(kafka, view, bootstrap)
        for check in CHECKS:
            if args.only and check.name not in args.only:
                continue
            print(f"{check.name} ...", file=sys.stderr, flush=True)
            rows.append(run_check(check, ctx, args.limit))
            print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
            if proxy is not None:
                import replog

                recording = proxy.take(
                    f"replog-{check.name}", client=f"replog {replog.__version__}"
                )
                recording.save(args.record / f"replog-{check.name}.json")
    finally:
        if proxy is not None:
            proxy.close()
        if not (args.reuse or args.keep):
            kafka.script("stop")
    print(table(rows))
    failed = [r.name for r in rows if not r.ok]
    print(
        f"{len(rows) - len(failed)} of {len(rows)} checks ok"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
