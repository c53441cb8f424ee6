"""A stand-in for Apache Kafka in tests: answers a client's requests with the responses a real
Kafka broker gave in a recording (tests/kafka/recorded_exchanges.py), so that a test can run a
client against Kafka's own answers without a JVM.

    with ReplayServer(Recording.load(RECORDED / "kafka-python-produce-consume.json")) as kafka:
        producer = KafkaProducer(bootstrap_servers=kafka.bootstrap)
        ...
        assert kafka.misses == []

Rules:
- One listener per broker of the recording, on a free loopback port; every broker address in a
  response is rewritten to its listener, so the client follows Metadata and FindCoordinator to
  the right stand-in.
- A request is answered with an exchange recorded with the same API key and version, looked
  for among those whose request matches on what matters (below), then among those of the same
  shape (the same partitions, at other offsets or epochs), then among any: in each, the first
  unused one at the same broker, else the first unused one anywhere (a client picks its
  bootstrap broker at random), else the last one that answered already (metadata refreshes,
  coordinator lookups, heartbeats and fetches that a slower or faster run repeats more often).
  An exchange Kafka never answered (the recorded client closed first) is picked for a Fetch
  only where none like the request was answered, and for any other request only where Kafka
  answered none of its API and version: Kafka answers such a request at once, and one that a
  slower run sends more often than the recording answered it (a third FindCoordinator, a
  Metadata refresh) must not hold the connection that the partitions' ListOffsets and Fetch go
  on next. A Fetch answered
  again waits its `max_wait_ms` (at most 0.5 s) first, as Kafka's purgatory would, so that a
  consumer does not spin on it. A request answered by an exchange Kafka never answered (the
  client closed first) is not answered either, and nothing more is read from its connection
  (Kafka reads a connection's next request only once it answered the one before), except a
  Fetch: that was a long poll that had found no record yet, and gets, after its `max_wait_ms`
  (at most 0.5 s), the answer Kafka gives one that finds none (`nothing_new`). `inexact` lists the
  requests answered without a match on what matters, to tell why a client saw what it saw. A
  request whose key and version were never recorded is a miss (`misses` names it) and its
  connection is closed: the test fails on what the client asked that Kafka never answered.
- What matters in a request: its decoded body, without the fields that vary from run to run and
  do not change Kafka's answer: the header's correlation id and client id, the records of a
  Produce request (their timestamps and CRCs differ each run; the partitions and their order do
  not), and ApiVersions' client software name and version. Ids that Kafka handed out (producer
  id and epoch, member ids, fetch session ids, generation ids) come back from the recorded
  answers, so the client sends the recorded values and they do count.
- The response sent carries the request's correlation id; nothing else in it is changed
  except broker addresses.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from replog.kafka.messages.fetch_request import FetchRequest
from replog.kafka.messages.fetch_response import (
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from replog.kafka.protocol import framing
from replog.kafka.protocol.codec import Struct
from tests.kafka.recorded_exchanges import (
    Address,
    Exchange,
    LoopThread,
    Recording,
    format_address,
    framed,
    parse_address,
    read_frame,
    rewrite_addresses,
    with_correlation_id,
)

MAX_REPEAT_WAIT_S = 0.5
# Request fields left out of the comparison (module docstring).
VARYING_FIELDS = frozenset({"records", "client_software_name", "client_software_version"})
# The fields that name a partition (kept in a request's shape): Fetch's and Produce's, and the
# lists of partition indexes of ListOffsets, OffsetFetch, OffsetCommit and their kin.
PARTITION_FIELDS = frozenset({"partition", "partition_index", "index", "partition_indexes"})


def what_matters(frame: bytes) -> Any:
    """The request's body as nested tuples, without VARYING_FIELDS (module docstring)."""
    return _plain(framing.decode_request(frame)[1], shape=False)


def its_shape(frame: bytes) -> Any:
    """What the request is about: `what_matters` without its numbers other than partition
    indexes (a Fetch of the same partitions at other offsets has the same shape)."""
    return _plain(framing.decode_request(frame)[1], shape=True)


def _plain(value: Any, *, shape: bool, name: str = "") -> Any:
    if isinstance(value, list | tuple):
        return tuple(_plain(v, shape=shape, name=name) for v in value)
    if isinstance(value, Struct):
        return tuple(
            (field, _plain(getattr(value, field), shape=shape, name=field))
            for field in type(value).__slots__
            if field not in VARYING_FIELDS
        )
    if isinstance(value, memoryview):
        return bytes(value)
    if shape and isinstance(value, int) and name not in PARTITION_FIELDS:
        return None
    return value


def nothing_new(request: FetchRequest) -> FetchResponse:
    """Kafka's answer to a long-poll Fetch that found no record in `max_wait_ms`: each partition
    without records, its high watermark at the offset asked for (a higher one would have been
    answered at once, with records)."""
    return FetchResponse(
        session_id=request.session_id,
        responses=[
            FetchableTopicResponse(
                topic=t.topic,
                topic_id=t.topic_id,
                partitions=[
                    PartitionData(
                        partition_index=p.partition,
                        high_watermark=p.fetch_offset,
                        last_stable_offset=p.fetch_offset,
                        log_start_offset=-1,
                        records=b"",
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )


class _Pool:
    """The exchanges recorded with one API key and version, in recorded order."""

    def __init__(self) -> None:
        self.exchanges: list[tuple[Exchange, Any, Any]] = []  # exchange, what matters, shape
        self.used: list[bool] = []

    def add(self, exchange: Exchange) -> None:
        request = exchange.request
        self.exchanges.append((exchange, what_matters(request), its_shape(request)))
        self.used.append(False)

    def pick(self, broker: str, frame: bytes) -> tuple[Exchange, bool, bool]:
        """The exchange to answer with (module docstring), whether it was used before, and
        whether its request matched on what matters."""
        wanted, shape = what_matters(frame), its_shape(frame)
        # An exchange Kafka left unanswered (the client closed first): a Fetch's only where no
        # answered one is as like the request, another's only where none was answered at all
        # (module docstring).
        exchanges = [exchange for exchange, _, _ in self.exchanges]
        held_too = exchanges[0].api == "Fetch" or all(e.response is None for e in exchanges)
        anywhere = [i for i, e in enumerate(exchanges) if held_too or e.response is not None]
        here = [i for i in anywhere if self.exchanges[i][0].broker == broker]
        matching = [i for i in anywhere if self.exchanges[i][1] == wanted]
        shaped = [i for i in anywhere if self.exchanges[i][2] == shape]
        matching_here = [i for i in matching if i in here]
        shaped_here = [i for i in shaped if i in here]
        # (candidates, whether one used before may answer again), in order of preference
        steps = (
            (matching_here, False),
            (matching, False),
            (matching_here, True),
            (matching, True),
            (shaped_here, False),
            (shaped, False),
            (shaped_here, True),
            (shaped, True),
            (here, False),
            (anywhere, False),
            (here, True),
            (anywhere, True),
        )
        for candidates, again in steps:
            answered = [i for i in candidates if self.exchanges[i][0].response is not None]
            usable = [i for i in answered or candidates if again or not self.used[i]]
            if usable:
                i = usable[-1] if again else usable[0]
                repeated = self.used[i]
                self.used[i] = True
                return self.exchanges[i][0], repeated, i in matching
        raise AssertionError("a pool holds at least one exchange")


class ReplayServer:
    """Kafka's recorded answers, served (module docstring)."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self.misses: list[str] = []
        self.inexact: list[str] = []  # requests answered with another request's answer
        self.answered: list[Exchange] = []  # in the order they were sent, repeats included
        self.held: list[Exchange] = []  # requests left unanswered, as Kafka left them
        self._pools: dict[tuple[int, int], _Pool] = {}
        for exchange in sorted(recording.exchanges, key=lambda e: e.seq):
            self._pools.setdefault((exchange.key, exchange.version), _Pool()).add(exchange)
        self._thread = LoopThread(f"kafka-replay-{recording.scenario}")
        self._servers: list[asyncio.Server] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._mapping: dict[Address, Address] = {}
        for broker in recording.brokers:
            self._thread.run(self._listen(broker))

    @property
    def bootstrap(self) -> str:
        """The stand-ins of the recording's brokers, as bootstrap servers."""
        return ",".join(
            format_address(self._mapping[parse_address(b)]) for b in self.recording.brokers
        )

    def __enter__(self) -> ReplayServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        async def stop() -> None:
            for server in self._servers:
                server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        self._thread.run(stop())
        self._thread.close()

    async def _listen(self, broker: str) -> None:
        server = await asyncio.start_server(
            lambda r, w: self._spawn(self._serve(broker, r, w)), "127.0.0.1", 0
        )
        self._servers.append(server)
        host, port = server.sockets[0].getsockname()[:2]
        self._mapping[parse_address(broker)] = (host, port)

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(
        self, broker: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            while (frame := await read_frame(reader)) is not None:
                answer = await self._answer(broker, frame)
                if answer is None:
                    return
                if answer:
                    writer.write(framed(answer))
                    await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _answer(self, broker: str, frame: bytes) -> bytes | None:
        """The response frame; b"" for a request Kafka does not answer (Produce acks=0);
        None for a miss."""
        key, version, correlation_id = framing.peek_request(frame)
        _, body = framing.decode_request(frame)
        if key == 0 and getattr(body, "acks", -1) == 0:
            return b""
        pool = self._pools.get((key, version))
        if pool is None:
            self.misses.append(f"{body.NAME} v{version} at {broker}: never recorded")
            return None
        exchange, repeated, matched = pool.pick(broker, frame)
        if not matched:
            self.inexact.append(f"{body.NAME} v{version} at {broker}: {body}"[:2000])
        fetch = body if isinstance(body, FetchRequest) else None
        if fetch is not None and (repeated or exchange.response is None):
            await asyncio.sleep(min(fetch.max_wait_ms / 1000, MAX_REPEAT_WAIT_S))
        if exchange.response is None:
            self.held.append(exchange)
            if fetch is None:  # as Kafka left it, until the client or the server closes
                await asyncio.Event().wait()
                return None
            return framing.encode_response(
                key, version, correlation_id, nothing_new(fetch), framed=False
            )
        self.answered.append(exchange)
        response = rewrite_addresses(key, version, exchange.response, self._mapping)
        return with_correlation_id(response, correlation_id)
