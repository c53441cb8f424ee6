"""The `replog` command for benchmark scripts: run it, and a local cluster started for a run.

A failed command raises RuntimeError with the end of its stderr: a benchmark stops at the
first thing that did not work rather than measuring around it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

KAFKA_PORT_OFFSET = 200  # a bench cluster's Kafka listeners sit this far above its gRPC ports


def replog_cli(*args: str, timeout: float = 600, checkout: str | None = None) -> str:
    """Run `replog ARGS` (the code of `checkout` when given: another version, for an A/B run;
    the nodes it starts inherit it); its output (stdout and stderr)."""
    env = None
    if checkout is not None:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [checkout, os.environ.get("PYTHONPATH")])),
        }
    done = subprocess.run(
        [sys.executable, "-m", "replog.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=checkout,
        env=env,
    )
    if done.returncode != 0:
        raise RuntimeError(f"replog {' '.join(args)} failed: {done.stderr.strip()[-2000:]}")
    return done.stdout + done.stderr


@contextmanager
def running_cluster(
    data_dir: str,
    base_port: int,
    *start_args: str,
    kafka_base_port: int | None = None,
    checkout: str | None = None,
) -> Iterator[str]:
    """A 3-node cluster in `data_dir` (its internal listeners from `base_port`, its Kafka
    listeners from `kafka_base_port`, by default KAFKA_PORT_OFFSET above; the code of
    `checkout` if given), stopped on exit; yields its bootstrap servers, the Kafka listeners
    every client and `replog` command uses."""
    kafka = base_port + KAFKA_PORT_OFFSET if kafka_base_port is None else kafka_base_port
    replog_cli(
        "cluster",
        "start",
        "--data-dir",
        data_dir,
        "--base-port",
        str(base_port),
        "--kafka-base-port",
        str(kafka),
        *start_args,
        checkout=checkout,
    )
    try:
        yield ",".join(f"127.0.0.1:{kafka + i}" for i in range(3))
    finally:
        replog_cli("cluster", "stop", "--data-dir", data_dir, checkout=checkout)


def create_topic(bootstrap: str, topic: str, partitions: int, *configs: str) -> None:
    """A topic of `partitions` partitions, replication factor 3, with `configs` (`KEY=VALUE`)."""
    replog_cli(
        "topics",
        "create",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--partitions",
        str(partitions),
        "--replication-factor",
        "3",
        *(item for config in configs for item in ("--config", config)),
    )


def node_pids(data_dir: str) -> list[int]:
    """The process ids of the running cluster's nodes, node 1 first."""
    from replog.cli.local_cluster import LocalCluster

    pids = []
    for node in LocalCluster.load(data_dir).nodes:
        with open(node.pid_path, encoding="ascii") as f:
            pids.append(int(f.read().strip()))
    return pids
