"""`replog cluster start` on a stopped cluster's directory: `--base-port` and
`--kafka-base-port` move it to other ports, keeping its data (the nodes' server.properties are
rewritten: the quorum's voters, the listeners, the advertised listeners and the metrics port,
every other line kept; `--kafka-base-port` moves a broker's and a controller's Kafka listener
together); a port in use names the flag that moves that port; and `--fresh` deletes the old
cluster only once everything else was checked. A new cluster given `--base-port P` alone takes
its Kafka listeners from it (P + 200, its controllers' P + 300), so two clusters on different
base ports never meet on 9092, which stays the default without flags. In-process: nothing
starts."""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from replog.cli import cluster as cluster_cli
from replog.cli.local_cluster import DEFAULT_KAFKA_BASE_PORT, LocalCluster, kafka_base_port_for
from replog.config import parse_properties
from replog.errors import ReplogError
from tests.local_ports import KAFKA_CONTROLLER_PORT_OFFSET, KAFKA_PORT_OFFSET, free_base_port


def start_args(data_dir: Path, **flags: object) -> argparse.Namespace:
    args = argparse.Namespace(
        data_dir=str(data_dir),
        override=[],
        fresh=False,
        nodes=None,
        base_port=None,
        kafka_base_port=None,
        roles=("broker", "controller"),
    )
    for name, value in flags.items():
        setattr(args, name, value)
    return args


@pytest.fixture
def stopped(tmp_path: Path) -> LocalCluster:
    """A stopped 3-node cluster on free ports (its own, which a test may move it from)."""
    base = free_base_port(3)
    cluster = LocalCluster.plan(
        str(tmp_path / "cluster"), 3, base, kafka_base_port=base + KAFKA_PORT_OFFSET
    )
    cluster.write({"num.partitions": "2"})
    (Path(cluster.nodes[0].data_path) / "kept").write_text("data")
    return cluster


@contextmanager
def listening(port: int) -> Iterator[None]:
    with socket.socket() as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        busy.bind(("127.0.0.1", port))
        busy.listen()
        yield


def base_of(cluster: LocalCluster) -> int:
    return int(cluster.nodes[0].controller_address.rsplit(":", 1)[1])


def properties(cluster: LocalCluster, node_id: int) -> dict[str, str]:
    path = cluster.node(node_id).config_path
    return parse_properties(Path(path).read_text(), source=path)


def test_a_stopped_cluster_moves_to_new_ports_with_its_data_and_settings(
    stopped: LocalCluster,
) -> None:
    base = free_base_port(3)
    kafka = base + KAFKA_PORT_OFFSET
    args = start_args(Path(stopped.directory), base_port=base, kafka_base_port=kafka)
    moved = cluster_cli._cluster_to_start(args)
    assert LocalCluster.load(stopped.directory) == moved  # cluster.json rewritten
    assert moved.cluster_id == stopped.cluster_id
    voters = f"1@127.0.0.1:{base},2@127.0.0.1:{base + 1},3@127.0.0.1:{base + 2}"
    for i in (1, 2, 3):
        written = properties(moved, i)
        listeners = (
            f"CONTROLLER://127.0.0.1:{base + i - 1},PLAINTEXT://127.0.0.1:{kafka + i - 1},"
            f"CONTROLLER_KAFKA://127.0.0.1:{kafka + 100 + i - 1}"
        )
        assert written["controller.quorum.voters"] == voters
        assert written["listeners"] == written["advertised.listeners"] == listeners
        assert written["controller.listener.names"] == "CONTROLLER,CONTROLLER_KAFKA"
        assert moved.node(i).kafka_controller_address == f"127.0.0.1:{kafka + 100 + i - 1}"
        assert written["metrics.port"] == str(base + 100 + i - 1)
        assert moved.node(i).metrics_url == f"http://127.0.0.1:{base + 100 + i - 1}/metrics"
        # Everything else as it was: the override, the id, the data.
        unchanged = ("num.partitions", "cluster.id", "node.id", "log.dirs", "process.roles")
        assert {k: written[k] for k in unchanged} == {
            k: stopped.node_properties(stopped.node(i), {"num.partitions": "2"})[k]
            for k in unchanged
        }
    assert (Path(moved.nodes[0].data_path) / "kept").read_text() == "data"


def test_only_the_ports_a_flag_names_move(stopped: LocalCluster) -> None:
    old = base_of(stopped)
    kafka = free_base_port(3) + KAFKA_PORT_OFFSET
    args = start_args(Path(stopped.directory), kafka_base_port=kafka)
    in_use = rf"port {old + 1} is in use \(choose another --base-port\)"
    # gRPC ports in use: the refusal names --base-port.
    with listening(old + 1), pytest.raises(ReplogError, match=in_use):
        cluster_cli._cluster_to_start(args)
    moved = cluster_cli._cluster_to_start(
        start_args(Path(stopped.directory), kafka_base_port=kafka)
    )
    assert [n.controller_address for n in moved.nodes] == [
        n.controller_address for n in stopped.nodes
    ]
    assert [n.kafka_address for n in moved.nodes] == [f"127.0.0.1:{kafka + i}" for i in range(3)]
    assert [n.kafka_controller_address for n in moved.nodes] == [
        f"127.0.0.1:{kafka + 100 + i}" for i in range(3)
    ]


def test_a_moved_base_port_leaves_the_controllers_kafka_listeners(stopped: LocalCluster) -> None:
    base = free_base_port(3)
    moved = cluster_cli._cluster_to_start(start_args(Path(stopped.directory), base_port=base))
    assert [n.kafka_controller_address for n in moved.nodes] == [
        n.kafka_controller_address for n in stopped.nodes
    ]
    assert properties(moved, 2)["listeners"] == (
        f"CONTROLLER://127.0.0.1:{base + 1},PLAINTEXT://{stopped.node(2).kafka_address},"
        f"CONTROLLER_KAFKA://{stopped.node(2).kafka_controller_address}"
    )


def test_a_controller_only_cluster_keeps_its_kafka_listeners_when_it_moves(
    tmp_path: Path,
) -> None:
    """Its nodes serve Kafka's protocol only as controllers (K + 100 + i - 1): a move of
    either port keeps those listeners, where the Kafka base port is derived from them."""
    old = free_base_port(3)
    quorum = LocalCluster.plan(
        str(tmp_path / "quorum"), 3, old, ("controller",), kafka_base_port=old + KAFKA_PORT_OFFSET
    )
    quorum.write()
    controllers = [n.kafka_controller_address for n in quorum.nodes]
    assert controllers == [f"127.0.0.1:{old + KAFKA_CONTROLLER_PORT_OFFSET + i}" for i in range(3)]
    base = free_base_port(3)
    moved = cluster_cli._cluster_to_start(start_args(tmp_path / "quorum", base_port=base))
    assert [n.kafka_controller_address for n in moved.nodes] == controllers
    assert [n.kafka_address for n in moved.nodes] == [None, None, None]
    kafka = free_base_port(3) + KAFKA_PORT_OFFSET
    moved = cluster_cli._cluster_to_start(start_args(tmp_path / "quorum", kafka_base_port=kafka))
    assert [n.kafka_controller_address for n in moved.nodes] == [
        f"127.0.0.1:{kafka + 100 + i}" for i in range(3)
    ]
    written = properties(moved, 1)
    assert written["listeners"] == (
        f"CONTROLLER://127.0.0.1:{base},CONTROLLER_KAFKA://127.0.0.1:{kafka + 100}"
    )
    assert written["controller.listener.names"] == "CONTROLLER,CONTROLLER_KAFKA"


@pytest.mark.parametrize(
    ("node_id", "offset"),
    [(3, KAFKA_PORT_OFFSET), (2, KAFKA_CONTROLLER_PORT_OFFSET)],
    ids=["broker", "controller"],
)
def test_a_kafka_port_in_use_names_the_flag_that_moves_it(
    stopped: LocalCluster, node_id: int, offset: int
) -> None:
    """A broker's Kafka port or a controller's: both move with --kafka-base-port."""
    base = free_base_port(3)
    args = start_args(Path(stopped.directory), base_port=base)
    busy = base_of(stopped) + offset + node_id - 1
    with listening(busy), pytest.raises(ReplogError) as refused:
        cluster_cli._cluster_to_start(args)
    assert str(refused.value) == (
        f"node {node_id} cannot listen on 127.0.0.1:{busy}: port {busy} is in use "
        "(choose another --kafka-base-port)"
    )
    assert LocalCluster.load(stopped.directory) == stopped  # nothing rewritten
    grpc = base_of(stopped) + node_id - 1
    assert properties(stopped, node_id)["listeners"].startswith(f"CONTROLLER://127.0.0.1:{grpc},")


def test_new_clusters_given_only_base_ports_take_their_kafka_ports_from_them(
    tmp_path: Path,
) -> None:
    clusters = []
    for name in ("a", "b"):
        base = free_base_port(3)
        started = cluster_cli._cluster_to_start(start_args(tmp_path / name, base_port=base))
        kafka = [f"127.0.0.1:{base + KAFKA_PORT_OFFSET + i}" for i in range(3)]
        controllers = [f"127.0.0.1:{base + KAFKA_CONTROLLER_PORT_OFFSET + i}" for i in range(3)]
        assert [n.kafka_address for n in started.nodes] == kafka
        assert [n.kafka_controller_address for n in started.nodes] == controllers
        assert properties(started, 1)["listeners"] == (
            f"CONTROLLER://127.0.0.1:{base},PLAINTEXT://{kafka[0]},CONTROLLER_KAFKA://{controllers[0]}"
        )
        clusters.append(started)
    ports = [
        {address for n in cluster.nodes for address in n.listeners.values()} for cluster in clusters
    ]
    assert not ports[0] & ports[1]
    # Without flags Kafka's own port stays; a Kafka base port given always wins.
    assert kafka_base_port_for(None, None) == DEFAULT_KAFKA_BASE_PORT == 9092
    assert kafka_base_port_for(30000, 40000) == kafka_base_port_for(None, 40000) == 40000


def test_a_derived_kafka_port_out_of_range_says_where_it_came_from(tmp_path: Path) -> None:
    with pytest.raises(ReplogError) as refused:
        cluster_cli._cluster_to_start(start_args(tmp_path / "c", base_port=65300))
    assert str(refused.value) == (
        "--kafka-base-port 65500: ports 65500..65602 (brokers, then controllers from 65600) are "
        "not all in [1, 65535] (without --kafka-base-port, a new cluster's Kafka base port is "
        "--base-port 65300 + 200: give --kafka-base-port)"
    )
    assert not (tmp_path / "c").exists()


def test_a_stopped_cluster_still_refuses_another_size_or_settings(stopped: LocalCluster) -> None:
    for flags in ({"nodes": 1}, {"override": ["num.partitions=3"]}):
        with pytest.raises(ReplogError, match=r"holds a stopped 3-node cluster.*--fresh"):
            cluster_cli._cluster_to_start(start_args(Path(stopped.directory), **flags))
    assert LocalCluster.load(stopped.directory) == stopped


@pytest.mark.parametrize(
    ("flags", "busy_offset", "refusal"),
    [
        ({"override": ["log.retention.hours=abc"]}, None, "log.retention.hours='abc'"),
        ({}, 2, "is in use (choose another --base-port)"),
        ({}, KAFKA_PORT_OFFSET + 1, "is in use (choose another --kafka-base-port)"),
        ({"base_port": 65535}, None, "--base-port 65535"),
    ],
)
def test_a_refused_start_fresh_deletes_nothing(
    stopped: LocalCluster, flags: dict[str, object], busy_offset: int | None, refusal: str
) -> None:
    before = Path(LocalCluster.file_path(stopped.directory)).read_text()
    base = free_base_port(3)
    ports = {"base_port": base, "kafka_base_port": base + KAFKA_PORT_OFFSET}
    args = start_args(Path(stopped.directory), fresh=True, **{**ports, **flags})
    with contextlib.ExitStack() as busy:
        if busy_offset is not None:
            busy.enter_context(listening(base + busy_offset))
        with pytest.raises(ReplogError) as refused:
            cluster_cli._cluster_to_start(args)
    assert refusal in str(refused.value)
    assert Path(LocalCluster.file_path(stopped.directory)).read_text() == before
    assert (Path(stopped.nodes[0].data_path) / "kept").read_text() == "data"
    assert all(Path(node.config_path).exists() for node in stopped.nodes)


def test_start_fresh_deletes_the_old_cluster_once_every_check_passed(
    stopped: LocalCluster,
) -> None:
    base = free_base_port(1)
    args = start_args(
        Path(stopped.directory), fresh=True, nodes=1, base_port=base, kafka_base_port=base + 200
    )
    fresh = cluster_cli._cluster_to_start(args)
    assert [n.node_id for n in fresh.nodes] == [1]
    assert fresh.cluster_id != stopped.cluster_id
    assert not (Path(stopped.nodes[0].data_path) / "kept").exists()
    assert not Path(stopped.node(2).directory).exists()


def test_a_restart_on_a_port_in_use_names_the_start_that_moves_the_cluster(
    stopped: LocalCluster,
) -> None:
    """`restart N` starts one node on its own ports: the flag that moves them is start's."""
    grpc_2 = base_of(stopped) + 1
    args = argparse.Namespace(data_dir=stopped.directory, node_id=2, verbose=False, timeout=5.0)
    with listening(grpc_2), pytest.raises(ReplogError) as refused:
        cluster_cli.run_restart(args)
    assert str(refused.value) == (
        f"node 2 cannot listen on 127.0.0.1:{grpc_2}: port {grpc_2} is in use (`replog cluster "
        "stop`, then `replog cluster start --base-port PORT` moves the cluster)"
    )


def test_a_start_fresh_that_cannot_delete_a_node_leaves_no_cluster_listing_it(
    stopped: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cluster.json goes first: a node directory that cannot be deleted (EBUSY) is a one-line
    refusal naming it, and the next `start` refuses the leftover instead of running a cluster
    whose node 1 is gone."""
    stuck = stopped.node(2).directory
    rmtree = shutil.rmtree

    def rmtree_or_busy(path: str, *args: Any, **kwargs: Any) -> None:
        if path == stuck:  # as rmtree raises it on the directory itself
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), path)
        rmtree(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", rmtree_or_busy)
    base = free_base_port(3)
    fresh = start_args(
        Path(stopped.directory), fresh=True, base_port=base, kafka_base_port=base + 200
    )
    with pytest.raises(ReplogError) as refused:
        cluster_cli._cluster_to_start(fresh)
    assert str(refused.value) == (
        f"--fresh: cannot delete {stuck} (Device or resource busy); "
        f"{LocalCluster.file_path(stopped.directory)} is deleted already, so the next start "
        "refuses what is left of it: remove it, then start again"
    )
    assert not LocalCluster.exists(stopped.directory)
    assert not Path(stopped.node(1).directory).exists()
    monkeypatch.undo()
    for again in (start_args(Path(stopped.directory)), fresh):
        with pytest.raises(ReplogError, match=r"node-2 exists but .*cluster.json does not list"):
            cluster_cli._cluster_to_start(again)
    assert Path(stuck, "server.properties").exists()  # refused: nothing written or deleted
    assert not LocalCluster.exists(stopped.directory)


def test_a_move_that_failed_partway_is_finished_by_the_next_start(
    stopped: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Node 2's server.properties cannot be written (ENOSPC) after node 1's was: the refusal
    names it, and a plain `start` afterwards puts every node on the ports cluster.json names,
    where before node 1 alone had moved and the nodes never found each other."""
    full = stopped.node(2).config_path
    replace = os.replace

    def replace_or_full(source: str, target: str) -> None:
        if target == full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), source)
        replace(source, target)

    monkeypatch.setattr(os, "replace", replace_or_full)
    base = free_base_port(3)
    with pytest.raises(ReplogError) as refused:
        cluster_cli._cluster_to_start(start_args(Path(stopped.directory), base_port=base))
    assert str(refused.value) == (
        f"cannot write {full}: No space left on device; the move to other ports is unfinished "
        f"({LocalCluster.file_path(stopped.directory)} names them, not every node's "
        "server.properties yet): `replog cluster start` finishes it"
    )
    assert not Path(full + ".tmp").exists()
    assert properties(stopped, 1)["listeners"].startswith(f"CONTROLLER://127.0.0.1:{base},")
    assert properties(stopped, 2) == stopped.node_properties(
        stopped.node(2), {"num.partitions": "2"}
    )
    monkeypatch.undo()
    started = cluster_cli._cluster_to_start(start_args(Path(stopped.directory)))
    assert base_of(started) == base
    for node in started.nodes:
        written = properties(started, node.node_id)
        assert {k: written[k] for k in started.address_properties(node)} == (
            started.address_properties(node)
        )
    assert LocalCluster.load(stopped.directory) == started
    assert not LocalCluster.load(stopped.directory).rewrite_pending
    # With no move pending, a start leaves the files alone, hand edits included.
    edited = Path(started.node(3).config_path)
    edited.write_text(edited.read_text().replace("metrics.host=127.0.0.1", "metrics.host=::1"))
    before = edited.read_text()
    cluster_cli._cluster_to_start(start_args(Path(stopped.directory)))
    assert edited.read_text() == before
