"""A node process whose broker role gives up exits non-zero, saying why (as Kafka's broker does).

A broker that cannot register with the controller quorum within
`initial.broker.registration.timeout.ms` has nothing to serve: a process left running would
look healthy to a supervisor that only watches the pid.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_broker_that_cannot_register_exits_1_naming_the_setting(tmp_path: Path) -> None:
    nobody_listens = _unused_port()  # the only voter: no controller ever answers
    config = tmp_path / "server.properties"
    config.write_text(
        "\n".join(
            [
                "process.roles=broker",
                "node.id=2",
                "cluster.id=exit-test",
                f"controller.quorum.voters=1@127.0.0.1:{nobody_listens}",
                f"listeners=PLAINTEXT://127.0.0.1:{_unused_port()}",
                f"log.dirs={tmp_path / 'logs'}",
                "initial.broker.registration.timeout.ms=1000",
                "",
            ]
        )
    )
    node = subprocess.run(
        [sys.executable, "-m", "replog.cli.main", "node", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert node.returncode == 1, node.stderr
    assert "did not register within initial.broker.registration.timeout.ms (1000 ms)" in (
        node.stderr
    )
    assert "node 2: stopping: the broker lifecycle ended" in node.stderr
