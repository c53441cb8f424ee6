"""The broker data plane of a loopback cluster, driven as a client would drive it.

`Brokers` holds one `KafkaBrokerClient` per node (on the node's Kafka listener, as replog's
clients talk to it) and finds partitions' leaders and ISRs with the brokers' own Metadata.
`ProduceStream` is a producer task: one record per batch with acks=all, following leadership
changes the way a Kafka producer does (NOT_LEADER_OR_FOLLOWER names the new leader, or the
metadata is asked again; an unreachable broker makes it ask too), recording every
acknowledged (offset, value). `read_committed` reads a partition up to its high watermark as a
consumer, and `read_replica` reads a replica's log files directly once its node is dead.

What the tests check with these (docs/design/replication.md: the leader rules, #leader-election,
#scenarios, S5-S7):
- an acknowledged record is at its acknowledged offset, with its value, on every replica
  (`assert_acked`); retries may append a value twice, so only acknowledged offsets count;
- replicas hold byte-identical batches below the high watermark (`assert_identical`);
- an unclean election loses exactly the records above the surviving replica's log end.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self, TypeVar
from uuid import UUID

from cluster_helpers import LoopbackCluster

from replog.admin.cluster_metadata import ClusterMetadata, PartitionInfo
from replog.admin.controller_client import ControllerClient
from replog.admin.controller_results import NewTopic
from replog.admin.kafka_cluster_answers import cluster_metadata
from replog.errors import (
    KafkaError,
    NotLeaderOrFollowerError,
    ReplogError,
    TopicAlreadyExistsError,
)
from replog.record import build_batch, iter_batches
from replog.replication import messages as m
from replog.storage.log import Log
from replog.wire.kafka_broker_client import KafkaBrokerClient
from replog.wire.kafka_connection import KafkaConnections
from tests.local_ports import free_base_port

T = TypeVar("T")

# Short replication timers (Kafka's defaults are 30 s lag, 9 s session, 2 s heartbeat): a
# follower leaves the ISR 2-3 s after it stops fetching (the shrink check runs every lag / 2).
REPLICA_LAG_TIME_MAX_MS = 2000
HEARTBEAT_INTERVAL_MS = 500
CALL_TIMEOUT_MS = 2000  # one Metadata/Fetch/ListOffsets call
PRODUCE_TIMEOUT_MS = 10_000  # how long an acks=all produce may wait for the ISR
ACKS_ALL = m.ACKS_ALL
ACKS_LEADER = m.ACKS_LEADER


def overrides(**properties: object) -> list[str]:
    """`cluster start` arguments: `replica_lag_time_max_ms=2000` -> --override key=value
    (underscores become dots)."""
    args: list[str] = []
    for key, value in properties.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        args += ["--override", f"{key.replace('_', '.')}={text}"]
    return args


def replication_overrides(*, session_timeout_ms: int, min_insync_replicas: int) -> list[str]:
    return overrides(
        replica_lag_time_max_ms=REPLICA_LAG_TIME_MAX_MS,
        broker_session_timeout_ms=session_timeout_ms,
        broker_heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
        min_insync_replicas=min_insync_replicas,
    )


def new_cluster(tmp_path: Path, node_count: int) -> LoopbackCluster:
    return LoopbackCluster(tmp_path / "cluster", free_base_port(node_count), node_count)


async def in_thread(function: Callable[..., T], *args: object) -> T:
    """Run a blocking helper (the CLI, the admin client) without stalling the produce task."""
    return await asyncio.to_thread(function, *args)


async def wait_until(
    condition: Callable[[], Awaitable[bool]],
    timeout_s: float,
    what: str,
    *,
    seen: Callable[[], object] | None = None,
) -> float:
    """Poll `condition` until it holds; return when it held (time.monotonic()). On a timeout
    the message ends with what `seen` says (the last thing observed)."""
    deadline = time.monotonic() + timeout_s
    while not await condition():
        if time.monotonic() > deadline:
            last = "" if seen is None else f"; last seen: {seen()}"
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}{last}")
        await asyncio.sleep(0.05)
    return time.monotonic()


def others(node_ids: Iterable[int], *excluded: int) -> list[int]:
    return [i for i in node_ids if i not in excluded]


async def quorum_leader(cluster: LoopbackCluster) -> int:
    return (await in_thread(cluster.wait_for_leader)).leader_id


async def placement(cluster: LoopbackCluster, count: int) -> list[int]:
    """`count` node ids for a partition's replicas, preferred leader first, the metadata
    quorum's leader last if at all: killing or stopping the first ones then disturbs the data
    plane only (as long as the quorum leader stays put)."""
    leader = await quorum_leader(cluster)
    chosen = [*others(range(1, cluster.node_count + 1), leader), leader][:count]
    assert len(chosen) == count, f"{cluster.node_count} nodes cannot place {count} replicas"
    return chosen


def create_topic(
    cluster: LoopbackCluster, name: str, replicas: Sequence[int], configs: dict[str, str]
) -> UUID:
    """Create one partition on `replicas` (the first is the preferred leader)."""
    addresses = cluster.addresses
    with ControllerClient(list(addresses.values()), node_addresses=addresses) as admin:
        deadline = time.monotonic() + 30
        # The controller elects the first *unfenced* replica, so a topic created while the
        # preferred leader is still fenced gets another leader: wait for all to be unfenced.
        while not _unfenced(admin, replicas):
            assert time.monotonic() < deadline, f"brokers {list(replicas)} never all unfenced"
            time.sleep(0.1)
        while True:
            (created,) = admin.create_topics(
                [NewTopic(name, configs=configs, assignments={0: list(replicas)})]
            )
            if isinstance(created.error, TopicAlreadyExistsError):
                # A retried create whose first attempt was applied after all.
                (topic,) = admin.metadata([name]).topics
                assert topic.topic_id is not None, topic
                return topic.topic_id
            # The brokers register and unfence a moment after the quorum has a leader.
            if created.error is None or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert created.error is None, f"creating {name} on {replicas}: {created.error!r}"
    assert created.topic_id is not None
    return created.topic_id


def _unfenced(admin: ControllerClient, broker_ids: Sequence[int]) -> bool:
    try:
        brokers = admin.describe_cluster().brokers
    except ReplogError:  # no controller yet
        return False
    unfenced = {b.broker_id for b in brokers if not b.fenced}
    return set(broker_ids) <= unfenced


# --- the brokers --------------------------------------------------------------------------------


def record_values(records: bytes, where: str) -> dict[int, bytes]:
    """offset -> value of every record in whole v2 batches."""
    values: dict[int, bytes] = {}
    for batch in iter_batches(records, where=where):
        for record in batch:
            values[record.offset] = record.value or b""
    return values


def one_record(value: bytes, **options: int) -> bytes:
    return build_batch([(int(time.time() * 1000), None, value, ())], **options)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Consumed:
    """A partition read as a consumer, from offset 0 to the high watermark of the first
    answer (it may move meanwhile)."""

    node_id: int
    high_watermark: int
    values: dict[int, bytes]


class Brokers:
    """A KafkaBrokerClient per node, and what the brokers say about partitions."""

    def __init__(self, cluster: LoopbackCluster) -> None:
        self.cluster = cluster
        layout = cluster.layout
        self.addresses = {
            n.node_id: n.kafka_address for n in layout.nodes if n.kafka_address is not None
        }
        self._connections = KafkaConnections(client_id="tests", setup_timeout_ms=CALL_TIMEOUT_MS)
        self._clients: dict[int, KafkaBrokerClient] = {}
        # Nodes killed or stopped by the test: a stopped one accepts connections but never
        # answers, so asking it costs a whole call timeout.
        self.down: set[int] = set()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        self._clients = {}
        await self._connections.close()

    def client(self, node_id: int) -> KafkaBrokerClient:
        if node_id not in self._clients:
            self._clients[node_id] = KafkaBrokerClient(
                self.addresses[node_id], self._connections, request_timeout_ms=CALL_TIMEOUT_MS
            )
        return self._clients[node_id]

    # -- metadata --

    async def metadata(self, topic: str, *, ask: Iterable[int] | None = None) -> ClusterMetadata:
        """The first answer of the nodes in `ask` (default: all but `down`) to Metadata."""
        problems = []
        for node_id in ask or others(sorted(self.addresses), *self.down):
            try:
                answer = await self.client(node_id).metadata([topic], timeout_ms=500)
            except (KafkaError, OSError) as exc:
                problems.append(f"node {node_id}: {exc!r}")
                self.client(node_id).reconnect()
                continue
            return cluster_metadata(answer)
        raise AssertionError(f"no broker answered Metadata for {topic}: {problems}")

    async def partition(
        self, topic: str, partition: int = 0, *, ask: Iterable[int] | None = None
    ) -> PartitionInfo:
        metadata = await self.metadata(topic, ask=ask)
        for info in metadata.topics:
            if info.name == topic and partition < len(info.partitions):
                return info.partitions[partition]
        raise AssertionError(f"Metadata knows no partition {topic}-{partition}: {metadata}")

    async def unfenced(self, topic: str, *, ask: Iterable[int] | None = None) -> set[int]:
        return {b.broker_id for b in (await self.metadata(topic, ask=ask)).brokers}

    async def wait_partition(
        self,
        topic: str,
        check: Callable[[PartitionInfo], bool],
        timeout_s: float,
        what: str,
        *,
        ask: Iterable[int] | None = None,
    ) -> tuple[PartitionInfo, float]:
        """Poll Metadata until `check` holds; the partition then and when it was seen."""
        seen: list[PartitionInfo] = []
        asked = list(ask) if ask is not None else None

        async def holds() -> bool:
            try:
                seen.append(await self.partition(topic, ask=asked))
            except AssertionError:
                return False
            return check(seen[-1])

        at = await wait_until(
            holds, timeout_s, f"{topic}: {what}", seen=lambda: seen[-1] if seen else None
        )
        return seen[-1], at

    async def wait_isr(
        self, topic: str, isr: Iterable[int], timeout_s: float, *, ask: Iterable[int] | None = None
    ) -> tuple[PartitionInfo, float]:
        wanted = sorted(isr)
        return await self.wait_partition(
            topic,
            lambda p: sorted(p.isr) == wanted and p.leader is not None,
            timeout_s,
            f"ISR {wanted}",
            ask=ask,
        )

    # -- data --

    async def produce(
        self,
        node_id: int,
        topic: str,
        records: bytes,
        *,
        acks: int = ACKS_ALL,
        partition: int = 0,
        timeout_ms: int = PRODUCE_TIMEOUT_MS,
    ) -> m.ProducePartitionResult:
        request = m.ProduceRequest(
            acks, timeout_ms, (m.ProducePartition(topic, partition, records),)
        )
        (result,) = (await self.client(node_id).produce(request)).partitions
        return result

    async def fetch(
        self,
        node_id: int,
        entry: m.FetchPartition,
        *,
        replica_id: int = m.CONSUMER_REPLICA_ID,
        replica_epoch: int = -1,
    ) -> m.FetchPartitionResult:
        """One partition fetched at once (max wait 0)."""
        request = m.FetchRequest(
            (entry,), replica_id=replica_id, replica_epoch=replica_epoch, max_wait_ms=0
        )
        (result,) = (await self.client(node_id).fetch(request)).partitions
        return result

    async def high_watermark(self, node_id: int, topic: str, partition: int = 0) -> int:
        """The high watermark as a consumer sees it (ListOffsets latest)."""
        request = m.ListOffsetsRequest(
            (m.ListOffsetsPartition(topic, partition, m.LATEST_TIMESTAMP),)
        )
        (result,) = (await self.client(node_id).list_offsets(request)).partitions
        assert result.error is None, f"ListOffsets latest of {topic}-{partition}: {result.error!r}"
        return result.offset

    async def read_committed(self, node_id: int, topic: str, partition: int = 0) -> Consumed:
        """Everything below the high watermark, fetched from `node_id` as a consumer."""
        values: dict[int, bytes] = {}
        offset, high_watermark = 0, None
        while high_watermark is None or offset < high_watermark:
            result = await self.fetch(
                node_id, m.FetchPartition(topic, partition, offset, partition_max_bytes=1 << 20)
            )
            assert result.error is None, (
                f"consumer fetch of {topic}-{partition} at {offset} from node {node_id}: "
                f"{result.error!r}"
            )
            if high_watermark is None:
                high_watermark = result.high_watermark
            if not result.records:
                break
            got = record_values(result.records, f"fetch of {topic}-{partition} at {offset}")
            values.update(got)
            offset = max(got) + 1
        assert high_watermark is not None
        return Consumed(
            node_id, high_watermark, {o: v for o, v in values.items() if o < high_watermark}
        )


# --- a stream of acks=all produces --------------------------------------------------------------


@dataclass(frozen=True)
class Ack:
    offset: int
    value: bytes
    leader_id: int
    at: float  # time.monotonic() when the acknowledgement arrived


@dataclass
class ProduceStream:
    """A producer task: one record per request, acks=all, until the `async with` block ends.

    Every value is new (`prefix-N`) and sent once: a call that fails (unreachable broker,
    timeout, an error) is abandoned and its value's fate is unknown (it may be in the log).
    On NOT_LEADER_OR_FOLLOWER it goes to the leader the answer names, else asks Metadata.
    """

    brokers: Brokers
    topic: str
    prefix: str = "v"
    acks: list[Ack] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)  # what each request came back with
    leaders: list[int] = field(default_factory=list)  # every leader it produced to, in order
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Self:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            task, self._task = self._task, None
            await asyncio.wait_for(task, PRODUCE_TIMEOUT_MS / 1000 + 5)

    async def _leader(self) -> int | None:
        try:
            return (await self.brokers.partition(self.topic)).leader
        except AssertionError:
            return None

    async def _run(self) -> None:
        leader: int | None = None
        sequence = 0
        while not self._stop.is_set():
            if leader is None:
                leader = await self._leader()
                if leader is None:
                    await asyncio.sleep(0.05)
                    continue
            if not self.leaders or self.leaders[-1] != leader:
                self.leaders.append(leader)
            sequence += 1
            value = f"{self.prefix}-{sequence}".encode()
            try:
                result = await self.brokers.produce(leader, self.topic, one_record(value))
            except (KafkaError, OSError) as exc:
                # The connection failed or timed out (not an answer): ask for the leader again.
                self.outcomes[exc.error_name if isinstance(exc, KafkaError) else "OSError"] += 1
                self.brokers.client(leader).reconnect()
                leader = None
                await asyncio.sleep(0.02)
                continue
            if result.error is None:
                self.outcomes["ok"] += 1
                self.acks.append(Ack(result.base_offset, value, leader, time.monotonic()))
                continue
            self.outcomes[result.error.error_name] += 1
            if isinstance(result.error, NotLeaderOrFollowerError) and result.current_leader:
                named = result.current_leader.leader_id
                leader = named if named >= 0 and named != leader else None
            else:
                leader = None
            await asyncio.sleep(0.02)

    async def wait_for_acks(
        self,
        count: int,
        timeout_s: float,
        what: str = "",
        *,
        after: float = 0.0,
        where: Callable[[Ack], bool] = lambda ack: True,
    ) -> Ack:
        """The `count`-th ack arriving after `after` (time.monotonic()) for which `where`
        holds."""

        def matching() -> list[Ack]:
            return [a for a in list(self.acks) if a.at > after and where(a)]

        async def enough() -> bool:
            return len(matching()) >= count

        await wait_until(
            enough,
            timeout_s,
            f"{count} acks of {self.topic} {what}".strip(),
            seen=lambda: (
                f"{len(self.acks)} acks in all, leaders {self.leaders}, "
                f"outcomes {dict(self.outcomes)}"
            ),
        )
        return matching()[count - 1]


async def produce_values(
    brokers: Brokers, node_id: int, topic: str, values: Iterable[bytes], *, acks: int = ACKS_ALL
) -> list[Ack]:
    """Produce each value to `node_id` in turn; every one must be acknowledged."""
    acked = []
    for value in values:
        result = await brokers.produce(node_id, topic, one_record(value), acks=acks)
        assert result.error is None, f"produce of {value!r} to node {node_id}: {result.error!r}"
        acked.append(Ack(result.base_offset, value, node_id, time.monotonic()))
    return acked


def assert_unique_offsets(acks: Sequence[Ack]) -> None:
    """Two acknowledgements of one offset would mean one of them was lost."""
    seen: dict[int, Ack] = {}
    for ack in acks:
        assert ack.offset not in seen, (
            f"offset {ack.offset} acknowledged twice: {seen[ack.offset]}, {ack}"
        )
        seen[ack.offset] = ack


def assert_acked(acks: Sequence[Ack], values: dict[int, bytes], where: str) -> None:
    """Every acknowledged (offset, value) is in `values`, unchanged."""
    missing = [a for a in acks if values.get(a.offset) != a.value]
    assert not missing, (
        f"{len(missing)} of {len(acks)} acknowledged records are missing or different on "
        f"{where}; first: {missing[0]}, found there: {values.get(missing[0].offset)!r}; "
        f"offsets held: {min(values, default=None)}..{max(values, default=None)}"
    )


# --- the replicas' files, read after the nodes are dead ------------------------------------------


@dataclass(frozen=True)
class Replica:
    """One replica's log as its files hold it (read from a copy, so the node's files stay)."""

    node_id: int
    log_end_offset: int
    batches: tuple[tuple[int, bytes], ...]  # (base offset, bytes) of every batch
    leader_epochs: tuple[tuple[int, int], ...]  # (leader epoch, start offset)

    def below(self, offset: int, start: int = 0) -> tuple[tuple[int, bytes], ...]:
        """The batches whose base offset is in [start, offset)."""
        return tuple(b for b in self.batches if start <= b[0] < offset)

    @property
    def values(self) -> dict[int, bytes]:
        values: dict[int, bytes] = {}
        for base, raw in self.batches:
            values.update(record_values(raw, f"node {self.node_id} batch at {base}"))
        return values


def read_replica(
    cluster: LoopbackCluster, node_id: int, topic: str, scratch: Path, partition: int = 0
) -> Replica:
    """The log of `topic`-`partition` on `node_id`, whose process must be dead."""
    assert not any(
        str(cluster.layout.node(node_id).config_path).encode() in _cmdline(pid)
        for pid in cluster.node_pids()
    ), f"node {node_id} still runs"
    name = f"{topic}-{partition}"
    source = Path(cluster.layout.node(node_id).data_path) / name
    assert source.is_dir(), f"node {node_id} has no log for {name} ({source})"
    copy = scratch / f"node-{node_id}" / name
    shutil.copytree(source, copy)
    log = Log.open(
        str(copy), had_clean_shutdown=False, recovery_point=0, log_start_offset=0, high_watermark=0
    )
    try:
        # From its first segment: after DeleteRecords the files below it are gone.
        batches = tuple(log.read_batches(log.log_start_offset))
        epochs = tuple((e.leader_epoch, e.start_offset) for e in log.leader_epoch_cache.entries())
        return Replica(node_id, log.log_end_offset, batches, epochs)
    finally:
        log.close()


def _cmdline(pid: int) -> bytes:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    return b""


def read_replicas(
    cluster: LoopbackCluster, node_ids: Iterable[int], topic: str, scratch: Path, partition: int = 0
) -> list[Replica]:
    return [read_replica(cluster, i, topic, scratch, partition) for i in node_ids]


def assert_identical(
    replicas: Sequence[Replica], high_watermark: int, topic: str, start: int = 0
) -> None:
    """Every replica reaches the high watermark and holds the same batches below it, from the
    batch at `start` on (below it, after DeleteRecords, each replica deletes its own segments
    in its own time)."""
    for replica in replicas:
        assert replica.log_end_offset >= high_watermark, (
            f"{topic}: node {replica.node_id} ends at {replica.log_end_offset}, below the high "
            f"watermark {high_watermark}"
        )
    first = replicas[0]
    reference = first.below(high_watermark, start)
    for replica in replicas[1:]:
        batches = replica.below(high_watermark, start)
        if batches == reference:
            continue
        differ = next(
            (a[0], b[0])
            for a, b in zip([*reference, (None, b"")], [*batches, (None, b"")], strict=False)
            if a != b
        )
        raise AssertionError(
            f"{topic}: nodes {first.node_id} and {replica.node_id} differ below the high "
            f"watermark {high_watermark}: first differing batches at base offsets {differ} "
            f"({len(reference)} vs {len(batches)} batches); leader epochs "
            f"{first.leader_epochs} vs {replica.leader_epochs}"
        )


def error_code(error: KafkaError | None) -> str:
    return "NONE" if error is None else type(error).error_name
