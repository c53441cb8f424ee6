"""A batch damaged behind a clean shutdown, on a real 3-node cluster: the leader serves it (a
clean start rescans nothing, as in Kafka) and a new follower, added by a reassignment, refuses
it on every fetch. The follower counts each refusal in
`replog_follower_corrupt_fetch_total{topic,partition}` and logs one ERROR naming the
partition, the offset and the leader, not one per retry; `replog verify-log` on a stopped
node's log dir names the damaged batch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cluster_helpers import LoopbackCluster, replog, wait_for
from metrics_scrape import get, scrape

from replog.record import RECORD_BATCH_OVERHEAD

pytestmark = pytest.mark.slow


def cli(cluster: LoopbackCluster, *args: str, stdin: str | None = None) -> Any:
    return replog(*args, "--data-dir", str(cluster.data_dir), stdin=stdin)


def partition(cluster: LoopbackCluster) -> dict[str, Any]:
    result = cli(cluster, "topics", "describe", "--topic", "damaged", "--json")
    assert result.returncode == 0, result.stderr
    (found,) = json.loads(result.stdout)["topics"][0]["partitions"]
    assert isinstance(found, dict)
    return found


def segment(cluster: LoopbackCluster, node_id: int) -> Path:
    return cluster.data_dir / f"node-{node_id}" / "data" / "damaged-0" / ("0" * 20 + ".log")


def test_a_new_follower_refusing_a_corrupt_batch_counts_it_and_logs_one_error(
    cluster: LoopbackCluster, tmp_path: Path
) -> None:
    cluster.start()
    wait_for(
        lambda: cli(
            cluster, "topics", "create", "--topic", "damaged", "--partitions", "1",
            "--replication-factor", "2",
        ).returncode == 0,
        20,
        "topic damaged to be created",
    )  # fmt: skip
    produced = cli(
        cluster, "produce", "--topic", "damaged", stdin="".join(f"v{i}\n" for i in range(20))
    )
    assert produced.returncode == 0, produced.stderr
    replicas = partition(cluster)["replicas"]
    (outsider,) = {1, 2, 3} - set(replicas)
    wait_for(
        lambda: (
            len({segment(cluster, r).stat().st_size for r in replicas}) == 1
            and segment(cluster, replicas[0]).stat().st_size > 0
        ),
        20,
        "both replicas to hold the records",
    )
    stopped = cluster.cli("stop")
    assert stopped.returncode == 0, stopped.stderr
    for replica in replicas:  # a bit flipped in the first batch's records, on every copy
        path = segment(cluster, replica)
        data = bytearray(path.read_bytes())
        data[RECORD_BATCH_OVERHEAD + 3] ^= 0x10
        path.write_bytes(bytes(data))
    found = replog("verify-log", str(segment(cluster, replicas[0]).parent.parent))
    assert found.returncode == 1
    assert f"{segment(cluster, replicas[0])} at byte 0 (offset 0): CRC-32C mismatch" in (
        found.stdout
    )
    started = cluster.cli("start")
    assert started.returncode == 0, started.stderr

    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [
                {"topic": "damaged", "partition": 0, "replicas": [*replicas, outsider]}]}
        )
    )  # fmt: skip
    executed = cli(cluster, "reassign", "execute", "--reassignment-json-file", str(plan))
    assert executed.returncode == 0, executed.stderr
    url = cluster.layout.node(outsider).metrics_url
    assert url is not None

    def refusals() -> float:
        return get(
            scrape(url), "replog_follower_corrupt_fetch_total", topic="damaged", partition="0"
        )

    wait_for(lambda: refusals() >= 3, 30, "the new follower to refuse the batch three times")
    leader = partition(cluster)["leader"]
    log = (cluster.data_dir / f"node-{outsider}" / "node.log").read_text()
    errors = [line for line in log.splitlines() if "sent a corrupt batch" in line]
    assert len(errors) == 1, errors  # one ERROR, not one per refusal
    assert "ERROR" in errors[0]
    assert (
        f"damaged-0: the leader, broker {leader}, sent a corrupt batch at offset 0" in (errors[0])
    )
    assert outsider not in partition(cluster)["isr"]  # it never caught up
