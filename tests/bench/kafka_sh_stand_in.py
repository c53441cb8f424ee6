"""A stand-in `java` on PATH for tests of bench/kafka/kafka.sh that must not start a JVM: it
plays Kafka's StorageTool. `random-uuid` logs a log4j INFO line on stdout before the id, as
4.4's does with kafka.sh's log4j configuration; `format` writes its arguments, one a line, to
`$FORMAT_ARGS` and the cluster id it is given to `$FORMATTED_WITH`, then fails, so `start`
stops before it would spawn any JVM (its configs written)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

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
      printf '%s\\n' "$@" >"$FORMAT_ARGS"
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
        "FORMAT_ARGS": str(tmp_path / "format-args"),
    }
