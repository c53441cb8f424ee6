"""Three nodes on hosts of their own and their clients on a fourth (network namespaces on one
bridge: `network_namespaces.py`), each node configured as docs/operations.md's "Nodes on
separate hosts" says: its listeners on its own address, that address advertised, the voters
and every internal port named by it. The clients (`separate_hosts_client.py`) know only the
Kafka listeners.

What must hold: acks=all produce goes on while one node's link is cut (its partitions move to
the others, the ISRs shrink) and that node catches up once the link is back; every
acknowledged record is read back exactly once, at its acknowledged offset; and no node talks to
another over loopback: each listens on its own address only, and its connections run between
its address and the other hosts'.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from cluster_helpers import JsonLines, node_processes, wait_for
from network_namespaces import BridgedHosts, bridged_hosts

from replog.cli.local_cluster import new_cluster_id

pytestmark = pytest.mark.slow

CLIENT_SCRIPT = Path(__file__).with_name("separate_hosts_client.py")
# Addresses from TEST-NET-1 (RFC 5737): on no real network, so nothing else answers there.
NODES = {1: "192.0.2.1", 2: "192.0.2.2", 3: "192.0.2.3"}
CLIENT_ADDRESS = "192.0.2.10"
# The same ports on every host, as on separate machines; none of them a default (9092, 19092).
KAFKA_PORT, KAFKA_CONTROLLER_PORT = 29092, 29093
GRPC_PORT, RAFT_FETCH_PORT, APPEND_PORT, METRICS_PORT = range(39092, 39096)
TOPIC, PARTITIONS = "orders", 3
RATE = 200  # records a second, for as long as the test runs
WAIT_S = 60


def host(node_id: int) -> str:
    return f"node-{node_id}"


def node_properties(node_id: int, cluster_id: str) -> dict[str, str]:
    """A node's server.properties, as the guide writes them (log.dirs is `node_processes`')."""
    address = NODES[node_id]
    return {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "cluster.id": cluster_id,
        "controller.quorum.voters": ",".join(f"{i}@{a}:{GRPC_PORT}" for i, a in NODES.items()),
        "listeners": f"CONTROLLER://{address}:{GRPC_PORT},PLAINTEXT://{address}:{KAFKA_PORT},"
        f"CONTROLLER_KAFKA://{address}:{KAFKA_CONTROLLER_PORT}",
        "advertised.listeners": f"CONTROLLER://{address}:{GRPC_PORT},"
        f"PLAINTEXT://{address}:{KAFKA_PORT}",
        "controller.listener.names": "CONTROLLER,CONTROLLER_KAFKA",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
        "CONTROLLER_KAFKA:PLAINTEXT",
        "controller.quorum.fetch.port": str(RAFT_FETCH_PORT),
        "controller.quorum.append.port": str(APPEND_PORT),
        "metrics.host": address,
        "metrics.port": str(METRICS_PORT),
        # A cut-off node is fenced, and a silent follower leaves the ISR, within seconds.
        "broker.session.timeout.ms": "3000",
        "broker.heartbeat.interval.ms": "500",
        "replica.lag.time.max.ms": "3000",
        "replica.socket.timeout.ms": "3000",
    }


BOOTSTRAP = ",".join(f"{address}:{KAFKA_PORT}" for address in NODES.values())


def client(hosts: BridgedHosts, *args: str) -> str:
    """`separate_hosts_client.py ARGS` on the clients' host; its stdout (a failure raises)."""
    done = subprocess.run(
        hosts.run_in("client", [sys.executable, str(CLIENT_SCRIPT), *args]),
        capture_output=True,
        text=True,
        timeout=WAIT_S + 30,
        check=False,
    )
    # librdkafka logs every refused connect while the nodes start: the end says what failed.
    said = "\n".join(done.stderr.splitlines()[-20:])
    assert done.returncode == 0, f"client {args[0]}: exit {done.returncode}: {done.stdout}{said}"
    return done.stdout


class Producing:
    """The producer on the clients' host, its progress lines read as they come; its stderr
    (librdkafka's log) goes to `log`."""

    def __init__(self, hosts: BridgedHosts, log: Path) -> None:
        with log.open("w") as stderr:
            self.process = subprocess.Popen(
                hosts.run_in(
                    "client",
                    [sys.executable, str(CLIENT_SCRIPT), "produce", BOOTSTRAP, TOPIC, str(RATE)],
                ),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        self.log = log
        assert self.process.stdout is not None
        self.lines = JsonLines(self.process.stdout)
        self.latest: dict[str, Any] = {"acked": 0, "failed": 0, "by_partition": {}}

    def progress(self) -> dict[str, Any]:
        self.latest = ([self.latest, *self.lines.new()])[-1]
        assert self.process.poll() is None, f"the producer exited: {self.log.read_text()}"
        return self.latest

    def acked(self) -> int:
        return int(self.progress()["acked"])

    def acked_by_partition(self) -> dict[str, int]:
        return {p: int(n) for p, n in self.progress()["by_partition"].items()}

    def finish(self) -> dict[str, Any]:
        """Stop sending; the final report, once every record sent is settled."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        assert self.process.wait(timeout=WAIT_S) == 0, self.log.read_text()
        self.lines.reader.join(timeout=10)
        return ([self.latest, *self.lines.new()])[-1]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.lines.reader.join(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()


def test_nodes_on_separate_hosts_keep_every_acknowledged_record_through_a_cut_link(
    tmp_path: Path,
) -> None:
    cluster_id = new_cluster_id()
    addresses = {host(i): a for i, a in NODES.items()} | {"client": CLIENT_ADDRESS}
    with (
        bridged_hosts(addresses) as hosts,
        node_processes(
            tmp_path,
            {i: node_properties(i, cluster_id) for i in NODES},
            run_in=lambda node_id, argv: hosts.run_in(host(node_id), argv),
        ) as directories,
    ):
        try:
            client(hosts, "create", BOOTSTRAP, TOPIC, str(PARTITIONS))
            producing = Producing(hosts, tmp_path / "producer.log")
            try:
                run_through_a_cut_link(hosts, producing)
                # While records still flow, every connection is up: see who talks to whom.
                connections = {
                    i: hosts.sockets(host(i), "-t", "state", "established") for i in NODES
                }
                listening = {i: hosts.sockets(host(i), "-tl") for i in NODES}
                report = producing.finish()
            finally:
                producing.kill()
            read = json.loads(client(hosts, "read", BOOTSTRAP, TOPIC, str(PARTITIONS)))
        except BaseException:
            for node_id, directory in directories.items():
                tail = (directory / "node.log").read_text().splitlines()[-30:]
                print(f"--- node {node_id} ---", *tail, sep="\n")
            raise
    assert report["failed"] == []
    assert_read_back_exactly_once(report["acked"], read)
    for node_id in NODES:
        assert_only_own_address_and_peers(node_id, listening[node_id], connections[node_id])


def run_through_a_cut_link(hosts: BridgedHosts, producing: Producing) -> None:
    """Acks before the cut, acks on every partition while partition 0's leader is cut off
    (its partitions led elsewhere, the ISRs without it), and, once its link is back, every
    partition in sync on all three again, the producer sending throughout."""
    wait_for(lambda: producing.acked() >= 100, WAIT_S, "100 acknowledged records")
    cut = in_sync(hosts)["0"]["leader"]
    hosts.cut(host(cut))
    at_cut = producing.acked_by_partition()
    wait_for(
        lambda: all(
            producing.acked_by_partition().get(str(p), 0) >= at_cut.get(str(p), 0) + 50
            for p in range(PARTITIONS)
        ),
        WAIT_S,
        f"50 more acknowledged records on every partition with node {cut} cut off",
    )
    hosts.restore(host(cut))
    assert all(partition["isr"] == [1, 2, 3] for partition in in_sync(hosts).values())
    after = producing.acked()
    wait_for(lambda: producing.acked() >= after + 100, WAIT_S, "100 more acknowledged records")


def in_sync(hosts: BridgedHosts) -> dict[str, dict[str, Any]]:
    """Each partition's leader and ISR, once every ISR holds all three nodes."""
    described: dict[str, dict[str, Any]] = json.loads(
        client(hosts, "in-sync", BOOTSTRAP, TOPIC, str(len(NODES)))
    )
    return described


def assert_read_back_exactly_once(acked: list[list[Any]], read: list[list[Any]]) -> None:
    """Each acknowledged record once in what was read, in the partition its acknowledgement
    gave and at its offset, where it gave one (librdkafka acknowledged a record without its
    offset, None here, in one run of several: such a record is found by its value)."""
    assert acked
    assert len({(partition, offset) for partition, offset, _ in read}) == len(read)
    found: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for partition, offset, value in read:
        found[value].append((partition, offset))
    for partition, offset, value in acked:
        assert len(found[value]) == 1, (partition, offset, value, found[value])
        assert found[value][0][0] == partition, (partition, offset, value, found[value])
        assert offset is None or found[value][0][1] == offset, (partition, offset, value)


def assert_only_own_address_and_peers(node_id: int, listening: str, established: str) -> None:
    """Node `node_id` listens on its own address alone, and each of its connections runs from
    that address to one of the other hosts' (or its own): none over loopback, and some with
    another node. (Not necessarily with both: once the cut node has lost its leaderships, it
    and a node that is neither a partition leader nor the quorum leader have nothing to say
    to each other.)"""
    own = NODES[node_id]
    bound = {local for local, _ in _socket_pairs(listening)}
    assert bound == {own}, f"node {node_id} listens on {bound}"
    hosts_known = {*NODES.values(), CLIENT_ADDRESS}
    pairs = _socket_pairs(established)
    assert pairs, f"node {node_id} has no connections"
    for local, peer in pairs:
        for address in (local, peer):
            assert not ipaddress.ip_address(address).is_loopback, (node_id, local, peer)
        assert local == own and peer in hosts_known, (node_id, local, peer)
    others = {a for i, a in NODES.items() if i != node_id}
    assert others & {peer for _, peer in pairs}, (node_id, pairs)


def _socket_pairs(ss_output: str) -> list[tuple[str, str]]:
    """(local address, peer address) of each socket `ss -n` lists, IPv4-mapped IPv6 addresses
    (how gRPC's dual-stack socket shows) as IPv4."""
    pairs = []
    for line in ss_output.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 4:
            continue
        local, peer = fields[-2], fields[-1]
        pairs.append((_address(local), _address(peer)))
    return pairs


def _address(endpoint: str) -> str:
    host = endpoint.rsplit(":", 1)[0].strip("[]")
    if host in ("*", "0.0.0.0"):
        return host
    parsed = ipaddress.ip_address(host)
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return str(parsed.ipv4_mapped)
    return str(parsed)
