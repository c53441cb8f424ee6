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
- A request is answered with an exchange recorded with the same API key and version: the first
  unused one, looked for among those that match on what matters (below) at the same broker,
  then those that match at any broker (a client picks its bootstrap broker at random), then any
  at the same broker, then any at all (the client asked for something the recording does not
  have at that point: a partition fetched at another offset, a retry). When every candidate was
  used, the last one in the same order of preference answers again (metadata refreshes,
  heartbeats and fetches that a slower or faster run repeats more often); a Fetch answered
  again waits its `max_wait_ms` (at most 0.5 s) first, as Kafka's purgatory would, so that a
  consumer does not spin on it. A request whose key and version were never recorded is a miss
  (`misses` names it) and its connection is closed: the test fails on what the client asked
  that Kafka never answered.
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

FETCH_KEY = 1
MAX_REPEAT_WAIT_S = 0.5
# Request fields left out of the comparison (module docstring).
VARYING_FIELDS = frozenset({"records", "client_software_name", "client_software_version"})


def what_matters(frame: bytes) -> Any:
    """The request's body as nested tuples, without VARYING_FIELDS (module docstring)."""
    return _plain(framing.decode_request(frame)[1])


def _plain(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, Struct):
        return tuple(
            (name, _plain(getattr(value, name)))
            for name in type(value).__slots__
            if name not in VARYING_FIELDS
        )
    if isinstance(value, memoryview):
        return bytes(value)
    return value


class _Pool:
    """The exchanges recorded with one API key and version, in recorded order."""

    def __init__(self) -> None:
        self.exchanges: list[tuple[Exchange, Any]] = []
        self.used: list[bool] = []

    def add(self, exchange: Exchange) -> None:
        self.exchanges.append((exchange, what_matters(exchange.request)))
        self.used.append(False)

    def pick(self, broker: str, wanted: Any) -> tuple[Exchange, bool]:
        """The exchange to answer with (module docstring) and whether it was used before."""
        here = [i for i, (e, _) in enumerate(self.exchanges) if e.broker == broker]
        anywhere = list(range(len(self.exchanges)))
        matching = [i for i in anywhere if self.exchanges[i][1] == wanted]
        matching_here = [i for i in matching if i in here]
        for candidates in (matching_here, matching, here, anywhere):
            unused = [i for i in candidates if not self.used[i]]
            if unused:
                self.used[unused[0]] = True
                return self.exchanges[unused[0]][0], False
        for candidates in (matching_here, matching, here, anywhere):
            if candidates:
                return self.exchanges[candidates[-1]][0], True
        raise AssertionError("a pool holds at least one exchange")


class ReplayServer:
    """Kafka's recorded answers, served (module docstring)."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self.misses: list[str] = []
        self.answered: list[Exchange] = []  # in the order they were sent, repeats included
        self._pools: dict[tuple[int, int], _Pool] = {}
        for exchange in sorted(recording.exchanges, key=lambda e: e.seq):
            if exchange.response is not None:
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
        exchange, repeated = pool.pick(broker, what_matters(frame))
        if repeated and key == FETCH_KEY:
            await asyncio.sleep(min(getattr(body, "max_wait_ms", 0) / 1000, MAX_REPEAT_WAIT_S))
        self.answered.append(exchange)
        assert exchange.response is not None
        response = rewrite_addresses(key, version, exchange.response, self._mapping)
        return with_correlation_id(response, correlation_id)
