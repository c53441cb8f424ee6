"""`replog bench`'s replog systems reach the cluster the way every client does: `replog`
(replog's own client) and `replog-kafka` (confluent-kafka) both bootstrap from the brokers'
Kafka listeners (base port + 200 + i - 1), whatever the client of a clients run. Without
starting nodes: the spawn and the wait for the cluster are stand-ins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replog.cli import cluster, node_processes
from replog.cli.bench import systems


@pytest.mark.parametrize("name", ["replog", "replog-kafka"])
def test_every_client_bootstraps_from_the_kafka_listeners(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spawned: list[Any] = []

    def spawn(node: Any) -> int:
        spawned.append(node)
        return 1

    monkeypatch.setattr(node_processes, "spawn", spawn)
    monkeypatch.setattr(cluster, "wait_until_up", lambda layout, pids, timeout_s: None)
    system = systems.ReplogSystem(name, str(tmp_path / name), 24000)
    system.start()
    kafka = ",".join(f"127.0.0.1:{24200 + i}" for i in range(3))
    assert len(spawned) == 3
    assert system.bootstrap_servers == kafka
    for client in ("replog", "confluent-kafka", "kafka-python"):
        assert system.servers_for(client) == kafka
