"""bench/kafka/kafka.sh formats Kafka with the id alone, whatever StorageTool logs before it,
and writes the properties it is given (`KAFKA_PROPERTIES`, `KafkaSystem`'s) into every node's
server.properties. Under a stand-in `java` (`kafka_sh_stand_in`): no JVM starts.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from kafka_sh_stand_in import CLUSTER_ID, KAFKA_SH, stand_in_environment

from replog.cli.bench.systems import KafkaSystem
from replog.errors import BenchSystemError
from tests.local_ports import free_port


def test_start_formats_with_the_cluster_id_alone(tmp_path: Path) -> None:
    env = {**os.environ, **stand_in_environment(tmp_path)}
    formatted_with = Path(env["FORMATTED_WITH"])

    done = subprocess.run(
        ["bash", str(KAFKA_SH), "start"], env=env, capture_output=True, text=True, timeout=60
    )

    assert done.returncode != 0, done.stderr
    assert "formatting node 1 failed" in done.stderr
    assert formatted_with.read_text() == CLUSTER_ID


def test_kafka_system_properties_end_every_nodes_server_properties(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in stand_in_environment(tmp_path).items():
        monkeypatch.setenv(name, value)
    directory = tmp_path / "cluster"
    kafka = KafkaSystem(
        str(directory),
        free_port(),
        str(KAFKA_SH),
        properties=("log.cleaner.enable=false", "log.cleaner.backoff.ms=100"),
    )

    with pytest.raises(BenchSystemError, match="formatting node 1 failed"):
        kafka.start()

    for node in (1, 2, 3):
        lines = (directory / f"node-{node}" / "server.properties").read_text().splitlines()
        assert f"node.id={node}" in lines
        assert lines[-2:] == ["log.cleaner.enable=false", "log.cleaner.backoff.ms=100"]
