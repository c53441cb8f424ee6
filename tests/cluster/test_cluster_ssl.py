"""`replog cluster start --security ssl`: a one-node cluster whose broker serves Kafka's
protocol only over mutual TLS, with certificates made for it, and the client.properties it
writes used as it is by every client: `replog` commands with `--command-config` (topics,
produce, consume, consumer groups), replog's Producer, Consumer (in a group) and Admin, blocking
and asyncio, confluent-kafka and `kcat -F`. `status --json` names the file. A client with an
untrusted CA, or without a certificate, is refused with `SslAuthenticationError`; a plaintext
client at the TLS port, and a TLS client at the (PLAINTEXT) controller port, with
`SecurityProtocolMismatchError`; a second start reuses the certificates."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pyarrow as pa
import pytest
from cluster_helpers import LoopbackCluster, replog, replog_in_process, wait_for
from confluent_kafka.admin import AdminClient

from replog import Admin, Consumer, NewTopic, Producer, TopicPartition, aio
from replog.config import parse_properties
from replog.errors import SecurityProtocolMismatchError, SslAuthenticationError
from replog.spark import range_reader
from replog.spark.options import Mode, parse_options
from replog.spark.planning import OffsetRange
from tests.kafka.client_tools import kcat
from tests.local_ports import KAFKA_CONTROLLER_PORT_OFFSET, KAFKA_PORT_OFFSET, free_base_port
from tests.tls_certificates import Pki


@pytest.fixture(scope="module")
def ssl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackCluster]:
    cluster = LoopbackCluster(
        tmp_path_factory.mktemp("ssl") / "cluster", free_base_port(1), node_count=1
    )
    try:
        started = cluster.start("--security", "ssl")
        assert "--command-config" in started.stdout, started.stdout
        yield cluster
    finally:
        cluster.kill_everything()


def client_properties(cluster: LoopbackCluster) -> Path:
    return cluster.data_dir / "client.properties"


def settings(cluster: LoopbackCluster, **more: object) -> dict[str, object]:
    text = client_properties(cluster).read_text()
    return {**parse_properties(text, source="client.properties"), **more}


def cli(cluster: LoopbackCluster, *args: str, stdin: str | None = None) -> str:
    result = replog(*args, "--command-config", str(client_properties(cluster)), stdin=stdin)
    assert result.returncode == 0, f"replog {' '.join(args)}: {result.stderr}"
    return result.stdout


def test_status_names_the_client_config(ssl_cluster: LoopbackCluster) -> None:
    status = json.loads(ssl_cluster.ask("status", "--json").stdout)
    assert status["security"] == "ssl"
    assert status["client_config"] == str(client_properties(ssl_cluster))
    kafka = f"127.0.0.1:{ssl_cluster.base_port + KAFKA_PORT_OFFSET}"
    assert status["bootstrap_servers"] == kafka
    text = ssl_cluster.ask("status").stdout
    assert f"--command-config {client_properties(ssl_cluster)}" in text
    written = settings(ssl_cluster)
    assert written["security.protocol"] == "SSL" and written["bootstrap.servers"] == kafka
    tls = ssl_cluster.data_dir / "tls"
    assert written["ssl.ca.location"] == str(tls / "ca.pem")
    assert os.stat(tls / "client.key").st_mode & 0o077 == 0  # private keys: the owner's only
    server = (ssl_cluster.data_dir / "node-1" / "server.properties").read_text()
    assert "ssl.client.auth=required" in server and "SSL://127.0.0.1:" in server


def test_replog_commands_work_with_the_command_config(ssl_cluster: LoopbackCluster) -> None:
    created = cli(
        ssl_cluster, "topics", "create", "--topic", "orders", "--partitions", "2",
        "--replication-factor", "1",
    )  # fmt: skip
    assert "Created topic orders." in created
    assert "orders" in cli(ssl_cluster, "topics", "list").split()
    cli(ssl_cluster, "produce", "--topic", "orders", "--key-separator", ":", stdin="k1:a\nk2:b\n")
    consumed = cli(
        ssl_cluster, "consume", "--topic", "orders", "--from-beginning", "--print-key",
        "--max-messages", "2", "--group", "cli-readers",
    )  # fmt: skip
    assert sorted(consumed.splitlines()) == ["k1\ta", "k2\tb"], consumed
    assert "cli-readers" in cli(ssl_cluster, "consumer-groups", "--list")
    # Without it, the local cluster's client.properties is named at once, for admin and
    # client commands alike; a plaintext client given the address meets the TLS port.
    for command in (["topics", "list"], ["consume", "--topic", "orders", "--max-messages", "1"]):
        plain = replog(*command, "--data-dir", str(ssl_cluster.data_dir))
        assert plain.returncode == 1, plain.stderr
        assert f"--command-config {client_properties(ssl_cluster)}" in plain.stderr
        assert len(plain.stderr.strip().splitlines()) == 1, plain.stderr
    kafka = settings(ssl_cluster)["bootstrap.servers"]
    plain = replog("topics", "list", "--bootstrap-server", str(kafka))
    assert plain.returncode == 1 and "set security.protocol=SSL" in plain.stderr, plain.stderr


def test_replog_clients_over_mutual_tls(ssl_cluster: LoopbackCluster) -> None:
    config = settings(ssl_cluster)
    with Admin(config) as admin:
        admin.create_topics([NewTopic("payments", 1, 1)])
        assert "payments" in admin.list_topics()
        assert len(admin.describe_cluster().brokers) == 1
    with Producer(config) as producer:
        producer.send("payments", b"paid", key=b"order-1").get(timeout=30)
    group = {"group.id": "billing", "auto.offset.reset": "earliest"}
    with Consumer("payments", config={**config, **group}) as consumer:
        records = []
        for _ in range(30):
            for batch in consumer.poll(timeout_ms=1000).values():
                records += batch
            if records:
                break
        assert [(r.key, r.value) for r in records] == [(b"order-1", b"paid")]
        consumer.commit()
        assert consumer.committed(TopicPartition("payments", 0)) == 1

    async def asyncio_clients() -> list[bytes | None]:
        async with aio.Producer(config) as producer:
            await producer.send("payments", b"refunded", key=b"order-1")
        async with aio.Admin(config) as admin:
            assert "payments" in await admin.list_topics()
        async with aio.Consumer(config=config) as consumer:
            consumer.assign([TopicPartition("payments", 0)])
            consumer.seek(TopicPartition("payments", 0), 0)
            values: list[bytes | None] = []
            for _ in range(30):
                for batch in (await consumer.poll(timeout_ms=1000)).values():
                    values += [r.value for r in batch]
                if len(values) == 2:
                    break
            return values

    assert asyncio.run(asyncio_clients()) == [b"paid", b"refunded"]


def test_a_large_fetch_over_tls_arrives_whole(ssl_cluster: LoopbackCluster) -> None:
    """6 MB in one fetch: over TLS the socket's bytes are not the frame's, so the receive
    low-water mark a plaintext connection sets for a large frame (which here waited for
    ciphertext that never came, until the request timed out) is not set."""
    config = settings(ssl_cluster, **{"request.timeout.ms": 10_000})
    with Admin(config) as admin:
        admin.create_topics([NewTopic("large", 1, 1)])
    with Producer(config) as producer:
        for _ in range(3000):
            producer.send("large", b"x" * 2000)
        producer.flush()
    large = {"max.partition.fetch.bytes": 8_000_000, "fetch.max.bytes": 8_000_000}
    with Consumer(config={**config, **large}) as consumer:
        consumer.assign([TopicPartition("large", 0)])
        consumer.seek(TopicPartition("large", 0), 0)
        read = 0
        for _ in range(20):
            read += sum(len(batch) for batch in consumer.poll(timeout_ms=1000).values())
            if read == 3000:
                break
    assert read == 3000


def test_the_spark_source_reads_over_tls(ssl_cluster: LoopbackCluster) -> None:
    """An executor's range read, with the client.properties settings as `kafka.*` options:
    its fetches (received into numpy buffers) and its metadata go over mutual TLS."""
    config = settings(ssl_cluster)
    with Admin(config) as admin:
        admin.create_topics([NewTopic("spark-read", 1, 1)])
    with Producer(config) as producer:
        for i in range(500):
            producer.send("spark-read", b"%d" % i)
        producer.flush()
    options = {"bootstrap.servers": config["bootstrap.servers"], "subscribe": "spark-read"}
    options |= {f"kafka.{k}": str(v) for k, v in config.items() if k != "bootstrap.servers"}
    parsed = parse_options(options, Mode.BATCH)
    schema = pa.schema([pa.field("offset", pa.int64())])
    offsets = [
        offset
        for batch in range_reader.read_range(OffsetRange("spark-read", 0, 0, 500), parsed, schema)
        for offset in batch.column("offset").to_pylist()
    ]
    assert offsets == list(range(500))


def test_confluent_kafka_and_kcat_read_the_client_properties(ssl_cluster: LoopbackCluster) -> None:
    config = settings(ssl_cluster)
    admin = AdminClient(config)  # kept: a destroyed handle fails its futures
    admin.create_topics([confluent_kafka.admin.NewTopic("audit", 1, 1)])["audit"].result(30)
    producer = confluent_kafka.Producer(config)
    producer.produce("audit", b"seen", key=b"k")
    assert producer.flush(30) == 0
    listed = kcat().run("-F", str(client_properties(ssl_cluster)), "-L")
    assert "1 brokers:" in listed and 'topic "audit"' in listed, listed
    read = kcat().run(
        "-F", str(client_properties(ssl_cluster)), "-C", "-t", "audit", "-o", "beginning",
        "-e", "-f", "%k:%s\n",
    )  # fmt: skip
    assert read.split() == ["k:seen"]


def list_topics(config: dict[str, object]) -> list[str]:
    with Admin(config) as admin:
        return admin.list_topics(timeout_ms=10_000)


def test_bad_certificates_and_the_wrong_protocol_are_refused_by_name(
    ssl_cluster: LoopbackCluster, tmp_path: Path
) -> None:
    config = settings(ssl_cluster, **{"request.timeout.ms": 5000})
    stranger = Pki.create(tmp_path / "stranger")
    untrusted = {**config, "ssl.ca.location": str(stranger.truststore)}
    with pytest.raises(SslAuthenticationError, match="certificate is not trusted"):
        list_topics(untrusted)
    client_files = ("ssl.certificate.location", "ssl.key.location")
    anonymous = {k: v for k, v in config.items() if k not in client_files}
    with pytest.raises(SslAuthenticationError, match="refused this client's"):
        list_topics(anonymous)
    plaintext: dict[str, object] = {"bootstrap.servers": config["bootstrap.servers"]}
    with pytest.raises(SecurityProtocolMismatchError, match=r"set security\.protocol=SSL"):
        list_topics(plaintext)
    controller = f"127.0.0.1:{ssl_cluster.base_port + KAFKA_CONTROLLER_PORT_OFFSET}"
    with pytest.raises(SecurityProtocolMismatchError, match="is a PLAINTEXT Kafka listener"):
        list_topics({**config, "bootstrap.servers": controller})


def test_sasl_ssl_is_refused_as_not_built(tmp_path: Path) -> None:
    refused = replog_in_process(
        "cluster", "start", "--security", "sasl_ssl", "--data-dir", str(tmp_path / "c")
    )
    assert refused.returncode == 1 and "not built yet" in refused.stderr, refused
    assert not (tmp_path / "c").exists()


def test_a_second_start_reuses_the_certificates(ssl_cluster: LoopbackCluster) -> None:
    # Last in this module: it stops the cluster the others use, and moves it to other ports.
    tls = ssl_cluster.data_dir / "tls"
    before = {p.name: p.read_bytes() for p in tls.iterdir()}
    stopped = ssl_cluster.cli("stop")
    assert stopped.returncode == 0, stopped.stderr
    downgrade = ssl_cluster.cli("start", "--security", "plaintext")
    assert downgrade.returncode == 1 and "--security ssl" in downgrade.stderr, downgrade.stderr
    moved = free_base_port(1)
    kafka_port = str(moved + KAFKA_PORT_OFFSET)
    ssl_cluster.start("--base-port", str(moved), "--kafka-base-port", kafka_port, planned=False)
    assert {p.name: p.read_bytes() for p in tls.iterdir()} == before
    # client.properties names the new ports; the certificates name hosts, not ports.
    assert settings(ssl_cluster)["bootstrap.servers"] == f"127.0.0.1:{kafka_port}"

    def listed() -> bool:
        config = str(client_properties(ssl_cluster))
        return replog("topics", "list", "--command-config", config).returncode == 0

    wait_for(listed, 30, "the moved cluster to list its topics over TLS")
