"""A broker's log cleaner follows the dynamic broker levels (`ReplicaManager._refresh_cleaner`):
its threads, key-map memory, I/O rate and backoff from this broker's config, else the cluster
default, else server.properties, taken by the running cleaner when a level changes."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from replog.quorum.metadata.records import ConfigRecord, ConfigResourceType
from replog.storage.cleaner.cleaner_config import CleanerConfig
from replog.testing import ManualClock
from tests.metadata.metadata_helpers import replayed
from tests.server.data_plane.test_replica_manager import Node, clock, cluster_image

__all__ = ["clock"]  # the fixture


def broker_config(broker: str, key: str, value: str | None) -> ConfigRecord:
    return ConfigRecord(ConfigResourceType.BROKER, broker, key, value)


def test_the_cleaner_takes_the_dynamic_broker_levels(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    node = Node(tmp_path, 1, clock)
    cleaner = node.log_manager.cleaner
    static = cleaner.config
    image = replayed(
        cluster_image(),
        broker_config("", "log.cleaner.threads", "2"),
        broker_config("", "log.cleaner.io.max.bytes.per.second", "1000000"),
        broker_config("", "log.cleaner.backoff.ms", "100"),
        broker_config("2", "log.cleaner.backoff.ms", "7"),  # another broker's
    )
    node.rm.apply_image(image)
    assert cleaner.config == CleanerConfig(threads=2, io_max_bytes_per_second=1e6, backoff_ms=100)
    # This broker's own level over the cluster default's.
    image = replayed(
        image,
        broker_config("1", "log.cleaner.backoff.ms", "50"),
        broker_config("1", "log.cleaner.dedupe.buffer.size", "2400"),
    )
    node.rm.apply_image(image)
    assert cleaner.config == CleanerConfig(
        threads=2, dedupe_buffer_size=2400, io_max_bytes_per_second=1e6, backoff_ms=50
    )
    # More than double the running threads: kept, with a warning naming the key.
    with caplog.at_level(logging.WARNING, logger="replog.server.data_plane.replica_manager"):
        image = replayed(image, broker_config("1", "log.cleaner.threads", "5"))
        node.rm.apply_image(image)
    assert cleaner.config.threads == 2
    assert "log.cleaner.threads=5" in caplog.text
    # Without dynamic values, server.properties' again.
    image = replayed(
        image,
        *(
            broker_config(broker, key, None)
            for broker in ("", "1")
            for key in (
                "log.cleaner.threads",
                "log.cleaner.dedupe.buffer.size",
                "log.cleaner.io.max.bytes.per.second",
                "log.cleaner.backoff.ms",
            )
        ),
    )
    node.rm.apply_image(image)
    assert cleaner.config == static


def test_the_first_image_sets_any_thread_count(tmp_path: Path, clock: ManualClock) -> None:
    # The cleaner's threads start after the first image (Kafka's broker too reads its dynamic
    # configs before it starts its cleaner): no half-to-double bound then.
    node = Node(tmp_path, 1, clock)
    node.rm.apply_image(replayed(cluster_image(), broker_config("1", "log.cleaner.threads", "4")))
    assert node.log_manager.cleaner.config.threads == 4
