"""`replog cluster start --override K=V` refuses a bad setting in one line before it writes or
starts anything, the broker's own settings (log manager, replica manager, data plane) included:
a node started with one would stay in recovery or exit, and `start` would only time out. A key
no node reads is a warning on stderr, and the cluster is written (and started) anyway."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from replog.cli import cluster as cluster_cli
from replog.errors import ConfigError
from tests.local_ports import KAFKA_PORT_OFFSET, free_base_port


def start_args(data_dir: Path, *overrides: str) -> argparse.Namespace:
    return argparse.Namespace(
        data_dir=str(data_dir),
        override=list(overrides),
        fresh=False,
        nodes=3,
        base_port=39192,
        roles=("broker", "controller"),
    )


@pytest.mark.parametrize(
    ("override", "refusal"),
    [
        ("log.retention.hours=abc", "log.retention.hours='abc': must be an integer"),
        ("segment.bytes=10", "segment.bytes='10': must be an integer >= 64"),
        ("replica.fetch.wait.max.ms=60000", "replica.fetch.wait.max.ms=60000 must not exceed"),
        ("log.initial.task.delay.ms=-7", "log.initial.task.delay.ms=-7: must be at least 0"),
        ("offsets.topic.num.partitions=0", "offsets.topic.num.partitions=0: must be at least 1"),
        ("replica.socket.timeout.ms=0", "replica.socket.timeout.ms=0: must be positive"),
    ],
)
def test_a_bad_broker_setting_is_refused_before_anything_is_written(
    tmp_path: Path, override: str, refusal: str
) -> None:
    data_dir = tmp_path / "cluster"
    with pytest.raises(ConfigError) as refused:
        cluster_cli._cluster_to_start(start_args(data_dir, override))
    assert refusal in str(refused.value)
    assert not data_dir.exists()


def test_an_unknown_override_is_a_warning_on_stderr_and_the_cluster_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka's rule (warned, not refused), said where the user looks: each node warned only in
    its node.log (a misspelled `num.partitons=3` must not start silently)."""
    data_dir = tmp_path / "cluster"
    args = start_args(data_dir, "num.partitons=3", "num.partitions=2")
    # Every port free, the Kafka listeners' too: the default Kafka base port (9092) may be
    # taken on a developer's machine, or by another cluster running there.
    args.base_port = free_base_port(3)
    args.kafka_base_port = args.base_port + KAFKA_PORT_OFFSET
    cluster = cluster_cli._cluster_to_start(args)
    assert capsys.readouterr().err.splitlines() == [
        "replog cluster: warning: --override num.partitons is not a setting replog knows; it is "
        "ignored (did you mean num.partitions?)"
    ]
    assert len(cluster.nodes) == 3 and (data_dir / "cluster.json").exists()

    known = start_args(tmp_path / "other", "num.partitions=2")
    known.base_port = free_base_port(3)
    known.kafka_base_port = known.base_port + KAFKA_PORT_OFFSET
    cluster_cli._cluster_to_start(known)
    assert capsys.readouterr().err == ""
