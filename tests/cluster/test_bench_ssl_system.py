"""`replog bench`'s replog system on an ssl cluster (`cluster start --security ssl`): it waits
for the nodes, creates topics through the TLS Kafka listeners, kills a partition leader and
waits for it to register again, dialling the internal gRPC with mutual TLS, which a plaintext
channel cannot reach."""

from __future__ import annotations

from pathlib import Path

import grpc

from replog.cli.bench.systems import ReplogSystem
from replog.cli.local_cluster import LocalCluster
from replog.client.sync_admin import Admin
from tests.local_ports import free_base_port


def test_the_bench_drives_an_ssl_cluster_over_mutual_tls(tmp_path: Path) -> None:
    system = ReplogSystem("replog", str(tmp_path / "bench"), free_base_port(3), security="ssl")
    try:
        system.start()
        assert system.client_config()["security.protocol"] == "SSL"
        system.create_topics(["bench-ssl"], 1)
        with Admin(system.client_config()) as admin:
            assert "bench-ssl" in admin.list_topics()
        killed = system.kill_leader("bench-ssl")
        system.restart_killed()  # asks the controllers over mutual TLS, waits for the broker
        address = LocalCluster.load(str(tmp_path / "bench")).nodes[killed - 1].controller_address
        # The internal listener is TLS only: a plaintext channel gets no answer.
        with grpc.insecure_channel(address) as channel:
            try:
                grpc.channel_ready_future(channel).result(timeout=2)
                ready = True
            except grpc.FutureTimeoutError:
                ready = False
        assert not ready
    finally:
        system.stop()
