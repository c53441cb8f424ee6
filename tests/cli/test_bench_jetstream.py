"""`replog bench --systems jetstream`'s pure parts (CI builds no Go and runs no NATS server):
each node's config puts JetStream, its client, cluster and monitoring ports where the system
looks for them, with a route to every node, and a partition is one stream."""

from __future__ import annotations

from pathlib import Path

from cli_runner import replog

from replog.cli.bench.jetstream import (
    CLUSTER_PORT_OFFSET,
    MONITOR_PORT_OFFSET,
    JetStreamSystem,
    build_script,
    node_config,
)
from replog.cli.bench.runner import stream_name
from replog.cli.bench.systems import SYSTEMS, make_system


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


def test_a_metadata_run_against_jetstream_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    workload = tmp_path / "m.yaml"
    workload.write_text(
        "name: m\nmetadataClients: 2\npartitionsPerTopic: 1\ntestDurationSeconds: 1\n"
    )
    outcome = replog("bench", str(workload), "--systems", "jetstream", "--output", str(tmp_path))
    assert outcome.returncode != 0
    assert "metadata run" in outcome.stderr and "jetstream cannot run it" in outcome.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["m.yaml"]  # no run directory was made
