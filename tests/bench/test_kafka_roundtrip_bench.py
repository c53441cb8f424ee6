"""bench/kafka_roundtrip.py against a Kafka listener in this process (its own thread and event
loop, handlers answering at once): each API's frame is what the listener decodes, each round
trip gets its own correlation id back, a first answer with an error stops the run, and the
summary prints each system's figures and the ratio per run."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
from bench_script import load_bench_script

from replog.kafka.connection import KafkaRequest
from replog.kafka.messages import fetch_response as kf
from replog.kafka.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from replog.kafka.messages.metadata_response import MetadataResponse, MetadataResponseTopic
from replog.kafka.messages.offset_for_leader_epoch_response import (
    EpochEndOffset,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)
from replog.kafka.protocol.codec import Message
from replog.server.kafka.kafka_listener import KafkaListener

roundtrip = load_bench_script("kafka_roundtrip.py", "kafka_roundtrip_bench")


class Answers:
    """ListOffsets, Metadata, Fetch and OffsetForLeaderEpoch answered at once; `error` goes
    into ListOffsets'."""

    served = {1: (4, 18), 2: (1, 7), 3: (0, 13), 18: (0, 4), 23: (2, 4)}

    def __init__(self) -> None:
        self.error = 0
        self.correlation_ids: list[int] = []

    async def handle(self, request: KafkaRequest, listener_name: str) -> Message | None:
        self.correlation_ids.append(request.correlation_id)
        if request.api_key == 2:
            partition = ListOffsetsPartitionResponse(error_code=self.error, offset=5)
            return ListOffsetsResponse(
                topics=[ListOffsetsTopicResponse(name="t", partitions=[partition])]
            )
        if request.api_key == 3:
            return MetadataResponse(topics=[MetadataResponseTopic(name="t")])
        if request.api_key == 23:
            return OffsetForLeaderEpochResponse(
                topics=[OffsetForLeaderTopicResult(topic="t", partitions=[EpochEndOffset()])]
            )
        records = b"\0" * (roundtrip.RECORDS * roundtrip.RECORD_BYTES)
        return kf.FetchResponse(
            responses=[
                kf.FetchableTopicResponse(topic="t", partitions=[kf.PartitionData(records=records)])
            ]
        )


@pytest.fixture
def served() -> Iterator[tuple[Answers, str]]:
    answers = Answers()
    loop = asyncio.new_event_loop()
    listener = KafkaListener("PLAINTEXT", "127.0.0.1", 0)
    loop.run_until_complete(listener.start(answers))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield answers, f"127.0.0.1:{listener.port}"
    finally:
        asyncio.run_coroutine_threadsafe(listener.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_each_api_is_timed_with_its_own_correlation_ids(served: tuple[Answers, str]) -> None:
    answers, address = served
    system = roundtrip.System("replog", address, None)
    for api in roundtrip.apis("t"):
        answers.correlation_ids.clear()
        trial = roundtrip.measure(system, api, 0, 50)
        assert (trial.api, trial.system) == (api.name, "replog")
        assert 0 < trial.median_us <= trial.p99_us
        # The first answer checked, the warm-up, then the timed ones: one id each, in order.
        assert answers.correlation_ids == list(range(1, 2 + roundtrip.WARM_UP + 50))


def test_an_error_in_the_first_answer_stops_the_run(served: tuple[Answers, str]) -> None:
    answers, address = served
    answers.error = 6  # NOT_LEADER_OR_FOLLOWER
    (list_offsets, *_) = roundtrip.apis("t")
    with pytest.raises(RuntimeError, match=r"ListOffsets: error codes \[6\]"):
        roundtrip.measure(roundtrip.System("replog", address, None), list_offsets, 0, 10)


def test_the_summary_gives_the_ratio_within_each_run(capsys: pytest.CaptureFixture[str]) -> None:
    def trial(system: str, run: int, median: float) -> object:
        return roundtrip.Trial(system, "ListOffsets", run, median, median * 2, 10.0, 1.0)

    trials = [trial("replog", 0, 300), trial("kafka", 0, 200), trial("replog", 1, 100)]
    trials.append(trial("kafka", 1, 200))
    (list_offsets, *_) = roundtrip.apis("t")
    roundtrip.summary(trials, ["replog", "kafka"], [list_offsets])
    out = capsys.readouterr().out
    assert "replog / kafka, per run" in out
    (line,) = [row for row in out.splitlines() if row.split()[:2] == ["ListOffsets", "median"]]
    assert "0.5 / 1 / 1.5x" in line


def test_apis_are_picked_by_name_and_an_unknown_one_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        roundtrip.main(["--apis", "Fetch,Nope"])
    assert "--apis: no API named Nope" in capsys.readouterr().err
