"""A loopback cluster (3 nodes unless asked) whose every node sits behind a TCP proxy, and client
streams on it.

Shared by the client fault tests (tests/cluster/test_cluster_client_faults.py), the network
partition tests (tests/cluster/test_cluster_network_partitions.py) and the link fault tests
(tests/cluster/test_cluster_link_faults.py).

The cluster (`start_proxied_cluster`): each node *advertises* the address of the proxy in front
of its Kafka listener (`advertised.listeners`, written into its server.properties before
`replog cluster start`), so clients, which bootstrap from those proxies (`bootstrap`), reach
it only through the proxy. With `partitionable=True` each node's internal (gRPC) listener is
behind a proxy too, and its `controller.quorum.voters` names the other voters by their proxies
(its own entry stays its real listener, which the node checks against `listeners`), so Raft,
the brokers' heartbeats to the active controller and the followers' ReplicaFetch streams go
through them; Raft Fetch, which has a listener of its own whose port a peer learns from the
node and dials at the host it reached the node at, goes through a second proxy per node
(`raft_fetch_proxies`). Those proxies listen on PROXY_HOST with the node's own port numbers,
which is what makes the learned port land on them. (Without `partitionable`, the nodes reach
each other directly: only clients go through proxies.)
Each proxy learns which node a connection comes from (tests/cluster/socket_owner.py):
`partition`, `isolate`, `cut_links` (any pairs: D3's ring) and `heal` then cut node-to-node
links pair by pair. The test process's own connections (its clients, its admin calls) are not
partitioned by those: a client can reach every node, as in scenarios D1 and D2 of
docs/design/reliability.md; `cut_clients_from(node)` cuts them from one node alone (D4).
`slow_links` and `corrupt_answers` spoil links without cutting them (D6, D8).

The streams: `Stream` sends unique values through one `replog.Producer` and records every
outcome; `Tail` reads a topic from offset 0 through one `replog.Consumer` as records commit;
`read_log` and `settled_log` read the whole topic back; `assert_exactly_once_in_order` checks
a stream against the log, `assert_consumer_was_given_the_log` a tail.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from client_cluster import ClientCluster
from cluster_helpers import LoopbackCluster, wait_for
from socket_owner import connecting_inode, owner
from tcp_proxy import TEST_PROCESS, TcpProxy

from replog import Consumer, Producer, TopicPartition
from replog.cli.local_cluster import (
    CONTROLLER_LISTENER,
    KAFKA_LISTENER,
    LocalCluster,
    LocalNode,
)
from replog.errors import ReplogError
from tests.local_ports import KAFKA_PORT_OFFSET, free_base_port

NODES = 3
# Written into every node's server.properties: a killed broker is fenced (out of the ISRs, its
# leaderships moved) 3 s after its last heartbeat instead of Kafka's 9 s; acks=all needs two
# copies; the offsets topic is small so that it is created quickly.
SERVER_PROPERTIES = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "min.insync.replicas": "2",
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
}
# The address partitionable clusters' proxies listen on: another loopback address, so that a
# proxy can take the port number of the node listener it stands in front of (module docstring).
PROXY_HOST = "127.0.0.2"
OUTSTANDING = 500  # sends not yet acknowledged, at most (bounds the stream's memory and pace)


# --- the cluster: every node behind a proxy it advertises ---------------------------------------


@dataclass
class ProxiedCluster:
    cluster: ClientCluster
    # node id -> the proxy in front of its internal (gRPC) listener in a partitionable
    # cluster, else the one in front of its Kafka listener (the clients')
    proxies: dict[int, TcpProxy]
    # node id -> the proxy in front of its Kafka listener, where clients connect
    kafka_proxies: dict[int, TcpProxy] = field(default_factory=dict)
    # node id -> the proxy in front of its Raft Fetch listener (partitionable clusters only)
    raft_fetch_proxies: dict[int, TcpProxy] = field(default_factory=dict)
    _pids: dict[int, int] = field(default_factory=dict)  # source_of's: node id -> process id

    def fronts(self, node_id: int) -> list[TcpProxy]:
        """Every proxy in front of `node_id`."""
        return [*self.data_fronts(node_id), *self._extra(self.raft_fetch_proxies, node_id)]

    def data_fronts(self, node_id: int) -> list[TcpProxy]:
        """The proxies in front of `node_id`'s listeners: where its followers fetch and its gRPC
        services answer (partitionable clusters), and where its clients connect."""
        return [self.proxies[node_id], *self._extra(self._clients_only(), node_id)]

    def _clients_only(self) -> dict[int, TcpProxy]:
        """The Kafka listeners' proxies where they are not `proxies` themselves."""
        return {n: p for n, p in self.kafka_proxies.items() if p is not self.proxies.get(n)}

    @staticmethod
    def _extra(proxies: dict[int, TcpProxy], node_id: int) -> list[TcpProxy]:
        proxy = proxies.get(node_id)
        return [proxy] if proxy is not None else []

    def all_proxies(self) -> list[TcpProxy]:
        return [
            *self.proxies.values(),
            *self._clients_only().values(),
            *self.raft_fetch_proxies.values(),
        ]

    @property
    def loopback(self) -> LoopbackCluster:
        return self.cluster.loopback

    @property
    def bootstrap(self) -> str:
        """What the clients start from: the Kafka listeners' proxies (their only way in)."""
        return ",".join(p.address for p in self.kafka_proxies.values())

    def producer(self, **config: object) -> Producer:
        return Producer(bootstrap_servers=self.bootstrap, **config)

    def consumer(self, **config: object) -> Consumer:
        return Consumer(bootstrap_servers=self.bootstrap, **config)

    def leaders(self, topic: str) -> dict[int, int | None]:
        """partition -> leader, as the active controller's metadata says."""
        with self.cluster.admin() as admin:
            (info,) = admin.metadata([topic]).topics
        assert info.error is None, f"{topic}: {info.error!r}"
        return {p.partition: p.leader for p in info.partitions}

    def quorum_leader(self) -> int:
        return self.loopback.wait_for_leader().leader_id

    def alive(self) -> set[int]:
        """The nodes whose process runs (a zombie does not)."""
        return self.loopback.running()

    def kill(self, node_id: int) -> None:
        self.loopback.kill(node_id)

    def restart(self, node_id: int) -> None:
        self.loopback.restart(node_id)

    def wait_healthy(self, topics: Sequence[str], timeout_s: float = 30) -> None:
        """Every broker unfenced and every partition of `topics` led, with a full ISR, and not
        being reassigned."""
        self.cluster.wait_healthy(topics, timeout_s)

    # --- network partitions (a cluster started with partitionable=True) ----------------------

    def partition(self, *groups: Iterable[int]) -> None:
        """Cut every link between nodes of different groups (each node in exactly one group);
        links inside a group, and the test's own connections, stay up."""
        members = [node for group in groups for node in group]
        assert sorted(members) == sorted(self.proxies), f"{groups} must cover every node once"
        group_of = {node: i for i, group in enumerate(groups) for node in group}
        self.cut_links(
            (a, b) for a in self.proxies for b in self.proxies if group_of[a] < group_of[b]
        )

    def cut_links(self, pairs: Iterable[tuple[int, int]]) -> None:
        """Cut the links between the two nodes of each pair, both ways; every other link, and
        the test's own connections, stay up (a partition that need not be transitive, as a
        majorities ring). `heal` ends it."""
        peers: dict[int, set[int]] = {node: set() for node in self.proxies}
        for a, b in pairs:
            peers[a].add(b)
            peers[b].add(a)
        for node, cut in peers.items():
            for proxy in self.fronts(node):
                proxy.block(cut)

    def isolate(self, node_id: int) -> None:
        """Cut `node_id` from every other node."""
        self.partition([node_id], [n for n in self.proxies if n != node_id])

    def cut_clients_from(self, node_id: int) -> None:
        """Cut this process's own connections (its clients) to `node_id`; the nodes' links
        stay up. `heal` ends it."""
        self.kafka_proxies[node_id].block([TEST_PROCESS])

    def cut_answers(self, node_id: int, to: int) -> None:
        """A one-way cut: what `node_id` sends to node `to` on the connections `to` opened
        (its answers) waits, while `to`'s requests still arrive. `heal` ends it."""
        for proxy in self.data_fronts(node_id):
            proxy.block((), answers_to=[to])

    def slow_links(self, node_id: int, delays_s: Mapping[int, tuple[float, float]]) -> None:
        """Delay both ways what each node in `delays_s` and `node_id` exchange on the
        connections it opened to `node_id` (a follower's fetches; its heartbeats too if
        `node_id` is the active controller), each chunk by a time drawn from its range;
        the links of nodes left out are not delayed. `heal` ends it."""
        for proxy in self.data_fronts(node_id):
            proxy.slow(delays_s)

    def corrupt_answers(self, node_id: int, to: Iterable[int], per_byte: float, seed: int) -> None:
        """Flip a bit in `per_byte` of the bytes `node_id` answers the nodes `to` on its
        listener (their fetches' answers, with the batches they copy; the proxy's
        `flipped_bits` counts them). `heal` ends it."""
        for proxy in self.data_fronts(node_id):
            proxy.corrupt(to, per_byte, seed)

    def heal(self) -> None:
        """End every fault between the nodes: partitions, delays, bit flips."""
        for node in self.proxies:
            for proxy in self.fronts(node):
                proxy.heal()

    def node_pids(self) -> dict[int, int]:
        """node id -> process id, of the nodes running now. Found by command line (it names
        the node's server.properties), not by pid file: `cluster start` writes that only after
        the process runs, and by then the node may have connected to its peers."""
        configs = {
            node.node_id: str(node.config_path).encode() for node in self.loopback.layout.nodes
        }
        return {
            node_id: pid
            for pid, argv in self.loopback.node_commands().items()
            for node_id, config in configs.items()
            if config in argv
        }

    def source_of(self, peer: tuple[str, int], ours: tuple[str, int]) -> int | None:
        """Which node (or TEST_PROCESS) opened the connection from `peer` to `ours`. Runs on
        a proxy's loop for every connection it accepts: the process ids are looked up again
        only when the ones known do not hold the socket (a node restarted, or not known yet)."""
        inode = connecting_inode(peer, ours)
        if inode is None:  # already closed: no process holds it any more
            return None
        found = owner(inode, self._pids)
        if found is None:
            self._pids = {**self.node_pids(), TEST_PROCESS: os.getpid()}
            found = owner(inode, self._pids)
        return found

    def connection_sources(self) -> dict[int | None, int]:
        """Connections the proxies accepted, by the node that opened them (TEST_PROCESS: this
        process; None: a process the proxy could not name)."""
        total: dict[int | None, int] = {}
        for proxy in self.all_proxies():
            for source, count in proxy.sources().items():
                total[source] = total.get(source, 0) + count
        return total

    def revive(self) -> None:
        """Start every node that is not running (after a test killed them)."""
        down = sorted(set(self.proxies) - self.alive())
        if len(down) == len(self.proxies):
            result = self.loopback.cli("start")
            assert result.returncode == 0, result.stderr
        else:
            for node_id in down:
                self.restart(node_id)


def start_proxied_cluster(
    data_dir: Path,
    *,
    partitionable: bool = False,
    properties: dict[str, str] | None = None,
    nodes: int = NODES,
) -> ProxiedCluster:
    """Write a cluster of `nodes` combined nodes whose nodes advertise their proxies, then
    start it with the CLI (`cluster start` starts a written, stopped cluster as it is).
    `properties` are added to SERVER_PROPERTIES; `partitionable` routes node-to-node traffic
    through the proxies too."""
    base_port = free_base_port(nodes)
    layout = LocalCluster.plan(
        str(data_dir), nodes, base_port, kafka_base_port=base_port + KAFKA_PORT_OFFSET
    )
    layout.write({**SERVER_PROPERTIES, **(properties or {})})
    loopback = LoopbackCluster(data_dir, base_port, nodes)
    proxied = ProxiedCluster(ClientCluster(loopback), {})
    fetch_base = free_base_port(nodes) if partitionable else 0
    for index, node in enumerate(layout.nodes):
        kafka_address = node.kafka_address
        assert kafka_address is not None
        if not partitionable:
            proxy = proxied.proxies[node.node_id] = TcpProxy(f"node-{node.node_id}")
            proxied.kafka_proxies[node.node_id] = proxy
            proxy.forward_to(kafka_address)
            _set_properties(Path(node.config_path), [advertised(node, proxy.address)])
            continue
        # Both proxies on PROXY_HOST with the node's port numbers (module docstring).
        host, port = node.controller_address.rsplit(":", 1)
        fetch_port = fetch_base + index
        front = proxied.proxies[node.node_id] = TcpProxy(
            f"node-{node.node_id}", port=int(port), host=PROXY_HOST
        )
        fetch = proxied.raft_fetch_proxies[node.node_id] = TcpProxy(
            f"node-{node.node_id}-raft-fetch", port=fetch_port, host=PROXY_HOST
        )
        front.forward_to(node.controller_address)
        fetch.forward_to(f"{host}:{fetch_port}")
        kafka = proxied.kafka_proxies[node.node_id] = TcpProxy(
            f"node-{node.node_id}-kafka", port=int(kafka_address.rsplit(":", 1)[1]), host=PROXY_HOST
        )
        kafka.forward_to(kafka_address)
        for proxy in (front, fetch, kafka):
            proxy.source_of = proxied.source_of
        voters = ",".join(
            f"{n.node_id}@{n.controller_address if n is node else proxy_address(n)}"
            for n in layout.nodes
        )
        lines = [
            advertised(node, kafka.address, front.address),
            f"controller.quorum.voters={voters}",
            f"controller.quorum.fetch.port={fetch_port}",
        ]
        _set_properties(Path(node.config_path), lines)
    try:
        loopback.start(planned=False)
        loopback.wait_for_leader(timeout_s=30)
        proxied.wait_healthy([])
    except BaseException:
        stop(proxied)
        raise
    return proxied


def advertised(node: LocalNode, kafka_address: str, internal_address: str | None = None) -> str:
    """The `advertised.listeners` line of `node` naming `kafka_address` for its Kafka
    listener (PLAINTEXT), `internal_address` (if given) for its internal gRPC listener, and
    its other listeners as they are."""
    chosen = {KAFKA_LISTENER: kafka_address}
    if internal_address is not None:
        chosen[CONTROLLER_LISTENER] = internal_address
    entries = [f"{name}://{chosen.get(name, address)}" for name, address in node.listeners.items()]
    return "advertised.listeners=" + ",".join(entries)


def proxy_address(node: LocalNode) -> str:
    """Where a partitionable cluster's proxy in front of `node`'s listener listens: the same
    port on PROXY_HOST."""
    return f"{PROXY_HOST}:{node.controller_address.rsplit(':', 1)[1]}"


def _set_properties(path: Path, assignments: Sequence[str]) -> None:
    """Replace (or add) `key=value` lines of a server.properties."""
    keys = {line.split("=", 1)[0] for line in assignments}
    kept = [
        line
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.split("=", 1)[0].strip() not in keys
    ]
    path.write_text("\n".join([*kept, *assignments, ""]), encoding="utf-8")


def stop(proxied: ProxiedCluster) -> None:
    try:
        proxied.cluster.stop()
    finally:
        for proxy in proxied.all_proxies():
            proxy.close()


# --- a stream of sends, and what the log holds afterwards ---------------------------------------


@dataclass
class Stream:
    """A thread sending unique values round-robin to a topic's partitions through one
    producer, at most OUTSTANDING unacknowledged; records each value's acknowledgement.
    `rate`: values per second at most (None: as fast as acknowledgements allow); after a stall
    it catches up by one second's worth at most. `value_size`: values padded to that many
    bytes. Several streams may share one producer (its requests then mix their topics)."""

    producer: Producer
    topic: str
    partitions: int
    rate: float | None = None
    value_size: int = 0
    sent: dict[int, list[bytes]] = field(default_factory=dict)  # partition -> values, in order
    acked: dict[bytes, Any] = field(default_factory=dict)  # value -> RecordMetadata
    failed: dict[bytes, BaseException] = field(default_factory=dict)
    send_errors: list[BaseException] = field(default_factory=list)
    metrics: dict[str, int] = field(default_factory=dict)  # the producer's, at the end

    def __post_init__(self) -> None:
        self.sent = {p: [] for p in range(self.partitions)}
        self._done = threading.Condition()
        self._slots = threading.Semaphore(OUTSTANDING)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"stream-{self.topic}", daemon=True)

    def __enter__(self) -> Stream:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is None:
            self.stop()
            return
        # The block failed: stop without letting a flush error hide why.
        with suppress(Exception):
            self.stop(flush_timeout_s=5)

    def stop(self, flush_timeout_s: float = 60) -> None:
        """Stop sending and wait for every outstanding send's outcome."""
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "the stream's send never returned"
        try:
            self.producer.flush(timeout=flush_timeout_s)
        finally:
            self.metrics = self.producer.metrics()

    @property
    def completed(self) -> int:
        with self._done:
            return len(self.acked) + len(self.failed)

    def wait_acks(self, count: int, timeout_s: float, what: str) -> None:
        """Until `count` more sends than now are acknowledged."""
        with self._done:
            target = len(self.acked) + count
            ok = self._done.wait_for(
                lambda: len(self.acked) >= target or bool(self.failed), timeout_s
            )
            assert not self.failed, f"sends failed: {self._first_failure()}"
            assert ok, (
                f"timed out after {timeout_s} s waiting for {count} acks {what}: "
                f"{len(self.acked)} acks in all; send errors {self.send_errors[:1]}; producer "
                f"metrics {self.producer.metrics()}"
            )

    def _run(self) -> None:
        number = 0
        next_at = time.monotonic()
        while not self._stop.is_set():
            if self.rate is not None:
                next_at = max(next_at + 1 / self.rate, time.monotonic() - 1)
                if self._stop.wait(next_at - time.monotonic()):
                    return
            if not self._slots.acquire(timeout=0.1):
                continue
            partition = number % self.partitions
            value = f"{partition}:{number:09d}".encode().ljust(self.value_size, b".")
            try:
                future = self.producer.send(self.topic, value=value, partition=partition)
            except ReplogError as exc:
                self.send_errors.append(exc)
                self._slots.release()
                return
            self.sent[partition].append(value)
            future.add_callback(lambda metadata, v=value: self._settle(v, metadata, None))
            future.add_errback(lambda exc, v=value: self._settle(v, None, exc))
            number += 1

    def _settle(self, value: bytes, metadata: Any, error: BaseException | None) -> None:
        with self._done:
            if error is None:
                self.acked[value] = metadata
            else:
                self.failed[value] = error
            self._done.notify_all()
        self._slots.release()

    def _first_failure(self) -> str:
        value, error = next(iter(self.failed.items()))
        return f"{len(self.failed)}; first {value!r}: {type(error).__name__}: {error}"


Log = dict[int, list[tuple[int, bytes]]]  # partition -> (offset, value) of every record


def read_log(
    clients: ProxiedCluster | ClientCluster, topic: str, partitions: int, timeout_s: float = 30
) -> Log:
    """Every record of `topic` as a consumer reads it: partition -> (offset, value), by offset."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    log: Log = {p: [] for p in range(partitions)}
    with clients.consumer(enable_auto_commit=False, auto_offset_reset="earliest") as consumer:
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, (
                f"reading {topic}: positions {[consumer.position(tp) for tp in tps]}, ends {ends}"
            )
            for tp, records in consumer.poll(timeout_ms=500).items():
                log[tp.partition].extend((r.offset, r.value or b"") for r in records)
    return log


def assert_exactly_once_in_order(
    stream: Stream, log: Log, log_start: Mapping[int, int] | None = None
) -> int:
    """Every sent value acknowledged, in the log once, at its acknowledged offset, in send
    order per partition, and nothing else there; the number of records checked. `log_start`:
    partition -> its log start offset, below which DeleteRecords removed the records (values
    acknowledged there are excused)."""
    assert not stream.send_errors, f"send raised: {stream.send_errors[0]!r}"
    assert not stream.failed, f"sends failed: {stream._first_failure()}; {stream.metrics}"
    checked = 0
    for partition, entries in log.items():
        values = [value for _, value in entries]
        duplicated = {v: n for v, n in Counter(values).items() if n > 1}
        assert not duplicated, (
            f"{stream.topic}-{partition}: {len(duplicated)} values appended more than once, "
            f"e.g. {next(iter(duplicated.items()))}; producer metrics {stream.metrics}"
        )
        sent = stream.sent[partition]
        start = (log_start or {}).get(partition, 0)
        if start:
            sent = [v for v in sent if v not in stream.acked or stream.acked[v].offset >= start]
        if values != sent:
            missing = set(sent) - set(values)
            stray = set(values) - set(sent)
            first = next((i for i, (a, b) in enumerate(zip(values, sent, strict=False)) if a != b),
                         min(len(values), len(sent)))  # fmt: skip
            raise AssertionError(
                f"{stream.topic}-{partition}: the log differs from what was sent: "
                f"{len(values)} records vs {len(sent)} sent, {len(missing)} lost, {len(stray)} "
                f"not sent; first difference at index {first}: "
                f"{values[first : first + 3]} vs {sent[first : first + 3]}; producer metrics "
                f"{stream.metrics}"
            )
        for offset, value in entries:
            metadata = stream.acked[value]
            assert (metadata.partition, metadata.offset) == (partition, offset), (
                f"{value!r} acknowledged at {metadata.partition}/{metadata.offset}, "
                f"found at {partition}/{offset}"
            )
        checked += len(entries)
    return checked


class Reader(Protocol):
    """A consumer's record of what it was given (a `Tail`, or the soak's consumer group)."""

    topic: str

    @property
    def seen(self) -> Log: ...  # partition -> (offset, value), in the order given


def assert_consumer_was_given_the_log(tail: Reader, log: Log) -> None:
    """The consumer was given exactly the final log, in order from its start: no record
    served above the high watermark and later truncated, none skipped, none given twice."""
    for partition, entries in log.items():
        seen = tail.seen[partition]
        first = next((i for i, (a, b) in enumerate(zip(seen, entries, strict=False)) if a != b),
                     min(len(seen), len(entries)))  # fmt: skip
        assert seen == entries, (
            f"{tail.topic}-{partition}: the consumer was given {len(seen)} records, the log holds "
            f"{len(entries)}; first difference at index {first}: consumer "
            f"{seen[first : first + 3]} vs log {entries[first : first + 3]}"
        )


def duplicates(log: Log) -> int:
    return sum(n - 1 for entries in log.values() for n in Counter(v for _, v in entries).values())


@dataclass
class Tail:
    """A thread reading every partition of a topic from offset 0 as records are committed;
    keeps (offset, value) per partition in the order poll returned them."""

    consumer: Consumer
    topic: str
    partitions: int
    seen: Log = field(default_factory=dict)
    errors: list[BaseException] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.seen = {p: [] for p in range(self.partitions)}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"tail-{self.topic}", daemon=True)

    def __enter__(self) -> Tail:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "the tail's poll never returned"

    @property
    def count(self) -> int:
        return sum(len(entries) for entries in self.seen.values())

    def _run(self) -> None:
        tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        self.consumer.assign(tps)
        self.consumer.seek_to_beginning(*tps)
        while not self._stop.is_set():
            try:
                batches = self.consumer.poll(timeout_ms=200)
            except ReplogError as exc:  # a failed poll returns nothing: recorded, not fatal
                self.errors.append(exc)
                continue
            for tp, records in batches.items():
                self.seen[tp.partition].extend((r.offset, r.value or b"") for r in records)

    def wait_for(self, ends: dict[int, int], timeout_s: float) -> None:
        """Until the tail has read up to `ends` (partition -> end offset)."""
        wait_for(
            lambda: all(len(self.seen[p]) >= end for p, end in ends.items()),
            timeout_s,
            f"the tail to read up to {ends} (it has {[len(v) for v in self.seen.values()]})",
        )


def settled_log(live: ProxiedCluster, topic: str, partitions: int) -> Log:
    """The log once its high watermarks stop moving. After the last acks=1 acknowledgement
    the followers may still be copying: a log read at once could end below records the tail
    is about to be given, legitimately."""
    log = read_log(live, topic, partitions)
    deadline = time.monotonic() + 30
    while True:
        time.sleep(1)
        again = read_log(live, topic, partitions)
        if again == log:
            return log
        assert time.monotonic() < deadline, f"{topic}: high watermarks still moving after 30 s"
        log = again
