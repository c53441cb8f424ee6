"""Fixtures of the cluster tests: a cluster directory whose processes are always killed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import LoopbackCluster

from tests.local_ports import free_base_port


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LoopbackCluster]:
    """A 3-node cluster directory on free loopback ports; not started."""
    loopback = LoopbackCluster(tmp_path / "cluster", free_base_port(3))
    try:
        yield loopback
    finally:
        loopback.kill_everything()
