"""`replog bench --systems jetstream`'s pure parts (CI builds no Go and runs no NATS server):
each node's config puts JetStream, its client, cluster and monitoring ports where the system
looks for them, with a route to every node, and a partition is one stream. A metadata run
against it, with a stand-in for `jsbench` (fake_bench_driver.py), counts a request's stream
creates and deletes every stream its admin processes made, and only those."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_runner import replog
from test_bench_processes import FAKE

from replog.cli.bench.jetstream import (
    CLUSTER_PORT_OFFSET,
    MONITOR_PORT_OFFSET,
    JetStreamSystem,
    build_script,
    node_config,
)
from replog.cli.bench.runner import Target, run_once, stream_name
from replog.cli.bench.systems import SYSTEMS, make_system
from replog.cli.bench.workload import parse_workload


def test_each_node_config_has_its_ports_a_store_and_routes_to_all() -> None:
    config = node_config(2, "/data/js", 25000)
    assert "server_name: n2\n" in config
    assert "listen: 127.0.0.1:25001\n" in config
    assert f"http: 127.0.0.1:{25000 + MONITOR_PORT_OFFSET + 1}\n" in config
    assert 'store_dir: "/data/js/n2"' in config
    assert f"  listen: 127.0.0.1:{25000 + CLUSTER_PORT_OFFSET + 1}\n" in config
    routes = [f"nats-route://127.0.0.1:{25000 + CLUSTER_PORT_OFFSET + i}" for i in range(3)]
    assert f"routes: [{', '.join(routes)}]" in config


def test_jetstream_is_a_system_whose_partitions_are_streams(tmp_path: Path) -> None:
    assert "jetstream" in SYSTEMS
    system = make_system("jetstream", str(tmp_path), 25000, None, "0")
    assert isinstance(system, JetStreamSystem) and system.driver == "jetstream"
    assert system.describe()["server_cpus"] == "0"
    assert stream_name("bench-1-0", 2) == "bench-1-0-p2"
    assert Path(build_script()).is_file()
    assert (Path(build_script()).parent / "main.go").is_file()


def test_a_controller_run_against_jetstream_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    workload = tmp_path / "c.yaml"
    workload.write_text("name: c\ncreatePartitions: 10\npartitionsPerTopic: 10\n")
    outcome = replog("bench", str(workload), "--systems", "jetstream", "--output", str(tmp_path))
    assert outcome.returncode != 0
    assert "controller run" in outcome.stderr and "jetstream cannot run it" in outcome.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["c.yaml"]  # no run directory was made


def test_a_metadata_run_counts_stream_creates_and_deletes_every_stream_its_admins_made(
    tmp_path: Path,
) -> None:
    # The stand-in keeps the "cluster's" streams in a file, as jsbench's roles would make them.
    servers = tmp_path / "cluster"
    servers.mkdir()
    system = JetStreamSystem(str(tmp_path / "system"), 25000)
    os.makedirs(system.directory)
    system.program, system.bootstrap_servers = FAKE, str(servers)
    system.create_topics(["someone-else"], 2)  # a topic the run must leave alone
    workload = parse_workload(
        {
            "name": "m",
            "metadataClients": 2,
            "topicsPerRequest": 3,
            "partitionsPerTopic": 2,
            "testDurationSeconds": 1,
        }
    )
    before_deletes: list[list[str]] = []

    def delete(names: list[str]) -> None:
        before_deletes.append((servers / "streams").read_text().split())
        system.delete_topics(names)

    target = Target("jetstream", str(servers), FAKE, system.create_topics, delete)
    result = run_once(target, workload, work_dir=str(tmp_path / "work"))
    metadata = result["metadata"]
    assert result["requests"]["produce"] == 40  # 20 requests from each admin process
    assert metadata["topics_per_s"] == pytest.approx(3 * metadata["requests_per_s"])
    assert metadata["partitions_per_s"] == pytest.approx(6 * metadata["requests_per_s"])
    # 2 admins x 20 requests x 3 topics x 2 streams, all gone after the run; the other stays.
    made = before_deletes[0][2:]
    assert len(made) == 240 and all(name.startswith("bench-") for name in made)
    assert (servers / "streams").read_text().split() == ["someone-else-p0", "someone-else-p1"]
