"""The broker's CPU per Kafka Produce request, in one process: the Kafka listener's handler
(`KafkaApis.produce`) into a real ReplicaManager over a log in a temporary directory, with no
network and no client, so the figure is the listener's and the broker's own work per request.

One broker leads one partition (RF 1, acks=1: nothing waits); each request carries one v2 batch
of `--records` records of `--value-bytes` bytes, decoded from its Kafka bytes as the listener
decodes it (the records stay a view of them) and answered at version 9, the answer encoded.
`--requests` requests per round are timed by the process's CPU clock (time.process_time), after
`--warm-up` unmeasured ones; prints each round's microseconds of CPU per request and the
min / median / max over `--rounds`.

    .venv/bin/python bench/kafka_produce_cpu.py [--rounds 7] [--requests 2000]
        [--records 16] [--value-bytes 1024]

To compare two checkouts, run it in each (each with its own venv, or this one's with
PYTHONPATH set to the other checkout), interleaved, on the same machine (docs/benchmarks.md,
"Kafka listener Produce without protobuf").
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from uuid import UUID

# bench/ first on sys.path would let bench/timeline.py shadow the package replog imports.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from replog.kafka.messages.produce_request import (  # noqa: E402
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from replog.quorum.metadata.delta import MetadataDelta  # noqa: E402
from replog.quorum.metadata.image import MetadataImage, MetadataProvenance  # noqa: E402
from replog.quorum.metadata.records import (  # noqa: E402
    METADATA_VERSION_FEATURE,
    Endpoint,
    FeatureLevelRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from replog.record import build_batch  # noqa: E402
from replog.server.data_plane.broker_cores import BrokerCores  # noqa: E402
from replog.server.data_plane.replica_manager import ReplicaManager, ReplicaManagerConfig  # noqa: E402
from replog.server.kafka.kafka_apis import KafkaApis  # noqa: E402
from replog.storage.log_config import LogConfig  # noqa: E402
from replog.storage.log_manager import LogManager  # noqa: E402
from replog.testing import LoopTasks  # noqa: E402

VERSION = 9


def _image() -> MetadataImage:
    delta = MetadataDelta(MetadataImage.EMPTY)
    records = (
        FeatureLevelRecord(METADATA_VERSION_FEATURE, 7),
        RegisterBrokerRecord(
            1, UUID(int=1001), 10, endpoints=(Endpoint("PLAINTEXT", "b1", 9092),), fenced=False
        ),
        TopicRecord("t", UUID(int=1)),
        PartitionRecord(UUID(int=1), 0, (1,), (1,), 1),
    )
    for offset, record in enumerate(records):
        delta.replay(record, offset)
    return delta.apply(MetadataProvenance(len(records) - 1, 1))


async def _rounds(args: argparse.Namespace, root: str) -> list[float]:
    logs = LogManager(root, LogConfig())
    manager = ReplicaManager(
        ReplicaManagerConfig(1), logs, broker_epoch=lambda: 10, tasks=LoopTasks()
    )
    image = _image()
    manager.apply_image(image)
    service = BrokerCores(1, replica_manager=manager)
    apis = KafkaApis(1, cluster_id="c", image=lambda: image, broker_service=service)
    value = b"x" * args.value_bytes
    frame = ProduceRequest(
        acks=1,
        timeout_ms=30_000,
        topic_data=[
            TopicProduceData(
                name="t",
                partition_data=[
                    PartitionProduceData(
                        index=0, records=build_batch([(0, None, value, ())] * args.records)
                    )
                ],
            )
        ],
    ).encode(VERSION)

    async def one() -> None:
        answer = await apis.produce(ProduceRequest.decode(frame, VERSION), VERSION)
        assert answer is not None
        assert answer.responses[0].partition_responses[0].error_code == 0
        answer.encode(VERSION)

    for _ in range(args.warm_up):
        await one()
    per_request_us: list[float] = []
    for _ in range(args.rounds):
        start = time.process_time()
        for _ in range(args.requests):
            await one()
        per_request_us.append((time.process_time() - start) / args.requests * 1e6)
        print(f"  round: {per_request_us[-1]:.1f} us of CPU per request", flush=True)
    logs.close()
    return per_request_us


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--warm-up", type=int, default=500)
    parser.add_argument("--records", type=int, default=16)
    parser.add_argument("--value-bytes", type=int, default=1024)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="replog-produce-cpu-") as root:
        figures = asyncio.run(_rounds(args, root))
    print(
        f"CPU per Produce request (us): min {min(figures):.1f} / median "
        f"{statistics.median(figures):.1f} / max {max(figures):.1f}"
    )


if __name__ == "__main__":
    main()
