"""bench/kafka/kafka.sh formats Kafka with the id alone, whatever StorageTool logs before it,
and writes the properties it is given (`KAFKA_PROPERTIES`, `KafkaSystem`'s) into every node's
server.properties.

A stand-in `java` on PATH plays Kafka's StorageTool: `random-uuid` logs a log4j INFO line on
stdout before the id, as 4.4's does with kafka.sh's log4j configuration, and `format` records the
cluster id it is given, then fails, so `start` stops before it would spawn any JVM.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from replog.cli.bench.systems import KafkaSystem
from replog.errors import BenchSystemError
from tests.local_ports import free_port

KAFKA_SH = Path(__file__).resolve().parents[2] / "bench" / "kafka" / "kafka.sh"
CLUSTER_ID = "q1Sh-9_siTWeh4Wf4vEbWA"

FAKE_JAVA = f"""#!/usr/bin/env bash
for arg in "$@"; do
  case "$arg" in
    random-uuid)
      echo "[2026-11-28 12:00:00,000] INFO Registered signal handlers (org.apache.kafka)"
      echo "{CLUSTER_ID}"
      exit 0 ;;
    format)
      while [[ $# -gt 0 && "$1" != "-t" ]]; do shift; done
      printf '%s' "$2" >"$FORMATTED_WITH"
      echo "formatting refused by the stand-in" >&2
      exit 1 ;;
  esac
done
exit 2
"""


def stand_in_environment(tmp_path: Path) -> dict[str, str]:
    """The environment under which kafka.sh runs the stand-in `java` (module docstring)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    java = bin_dir / "java"
    java.write_text(FAKE_JAVA)
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    cache = tmp_path / "kafka"
    (cache / "libs").mkdir(parents=True)
    (cache / "libs" / "kafka_2.13-4.4.0.jar").touch()  # fetch() then has nothing to do
    return {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "KAFKA_VERSION": "4.4.0",
        "KAFKA_CACHE": str(cache),
        "KAFKA_BASE_PORT": str(free_port()),
        "FORMATTED_WITH": str(tmp_path / "formatted-with"),
    }


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
