"""`replog perf produce|consume` against a real 3-node cluster, run as a user runs them.

One smoke test: produce 3000 records of 100 bytes (acks=all, through the local cluster's
cluster.json as the default bootstrap) and read them back with the consumer perf test (an
explicit --bootstrap-server), checking the counts in Kafka's output lines and the JSON output.
The formats themselves are tested without a cluster in tests/cli/test_perf.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from client_cluster import NO_GROUP_DELAY, ClientCluster, client_cluster
from cluster_helpers import replog

pytestmark = pytest.mark.slow

RECORDS = 3000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientCluster]:
    with client_cluster(tmp_path_factory.mktemp("perf"), 3, *NO_GROUP_DELAY) as started:
        yield started


def test_perf_produce_then_consume(cluster: ClientCluster) -> None:
    cluster.create_topic("perf", partitions=3, replication_factor=3)
    data_dir = str(cluster.loopback.data_dir)

    produced = replog(
        "perf", "produce", "--topic", "perf", "--num-records", str(RECORDS),
        "--record-size", "100", "--producer-props", "acks=all", "--data-dir", data_dir,
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    total = produced.stdout.splitlines()[-1]
    assert re.fullmatch(
        rf"{RECORDS} records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
        r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.",
        total,
    ), produced.stdout
    assert produced.stderr == ""  # not a terminal: no progress bar

    as_json = replog(
        "perf", "produce", "--topic", "perf", "--num-records", "500", "--record-size", "10",
        "--bootstrap-server", cluster.bootstrap, "--output", "json",
    )  # fmt: skip
    assert as_json.returncode == 0, as_json.stderr
    document = json.loads(as_json.stdout)
    assert (document["records"], document["failed"], document["bytes"]) == (500, 0, 5000)
    assert 0 < document["latency_ms"]["p50"] <= document["latency_ms"]["max"]

    consumed = replog(
        "perf", "consume", "--topic", "perf", "--messages", str(RECORDS + 500),
        "--bootstrap-server", cluster.bootstrap, "--timeout", "10000",
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    header, row = consumed.stdout.splitlines()
    assert header.startswith("start.time, end.time, data.consumed.in.MB, MB.sec")
    fields = row.split(", ")
    assert fields[4] == str(RECORDS + 500), row
    assert float(fields[2]) == pytest.approx((RECORDS * 100 + 500 * 10) / 1024 / 1024, abs=1e-4)
    assert consumed.stderr == ""  # no timeout warning
