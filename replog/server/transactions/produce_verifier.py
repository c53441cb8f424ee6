"""ProduceVerifier: a partition leader's transaction verification before a transactional
Produce (KIP-890): the batches that begin a producer's transaction on a partition wait until
the transaction coordinator verified the partition is in the transaction (Produce v11-) or
added it (v12+, transaction version 2), as Kafka's `ReplicaManager.appendRecords` does.

Rules:
- Only a Produce with a transactional id is looked at, and of each partition only the first
  batch's header (its producer, epoch and transactional flag; no record is decoded). A
  partition needs the coordinator when `txn_verification.needs_verification` says so (and
  it is led here; otherwise the append's own refusal answers).
- One producer's requests stay in order: while one waits for its coordinator, every later
  request of the same producer id waits behind it (a queue per producer id), then looks at
  the partitions again; a request with nothing to verify and nobody ahead goes on at once.
- `verify` returns the refusals (by partition index); the caller appends the others before
  it awaits anything else, so that a verification cannot go stale in between. The requests
  queued behind resume only after that append (the queue's next entry is woken, not run).
- An add the coordinator answers CONCURRENT_TRANSACTIONS is asked again while
  `txn_verification.add_retry_delay_ms` says so (the loop's clock), the request keeping its
  place in its producer's queue.
- A verified partition whose producer reached a later epoch meanwhile (a marker of the
  coordinator's abort of the verified transaction) is INVALID_TXN_STATE (`still_verified`);
  a partition the coordinator did not confirm gets `txn_verification.client_error`'s answer
  for the request's version.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from replog.errors import InvalidTxnStateError, KafkaError
from replog.record.header import RECORD_BATCH_OVERHEAD, BatchHeader, read_header
from replog.replication import messages as m
from replog.replication.producer_state import ProducerEntry
from replog.replication.txn_verification import (
    TxnOperation,
    add_retry_delay_ms,
    client_error,
    needs_verification,
    operation_for_produce,
    still_verified,
)
from replog.server.data_plane.replica_manager import ReplicaManager
from replog.server.transactions.txn_verifier import Answers

# (topic, partition, producer id) -> whether the partition is led here, and its producer's entry
ProducerLookup = Callable[[str, int, int], tuple[bool, ProducerEntry | None]]


def producer_entry(
    replica_manager: ReplicaManager, topic: str, partition_id: int, producer_id: int
) -> tuple[bool, ProducerEntry | None]:
    """A `ProducerLookup` over `replica_manager` (partially applied): whether
    `topic`-`partition_id` is led here, and its producer state of `producer_id`."""
    partition = replica_manager.partition(topic, partition_id)
    if partition is None or not partition.is_leader:
        return False, None
    return True, partition.producer_state.entry(producer_id)


class Coordinators(Protocol):
    """What the verifier asks through (`txn_verifier.TxnVerifier`)."""

    def ask(self, request: m.TxnPartitionsRequest) -> Awaitable[Answers]: ...


def first_transactional_header(records: bytes | memoryview) -> BatchHeader | None:
    """The first batch's header when it is a transactional data batch of a producer."""
    if len(records) < RECORD_BATCH_OVERHEAD:
        return None
    header = read_header(records)
    if not header.is_transactional or header.is_control or header.producer_id < 0:
        return None
    return header


class ProduceVerifier:
    """Verifies transactional produces before their append (module Rules)."""

    def __init__(self, verifier: Coordinators, producers: ProducerLookup) -> None:
        self._verifier = verifier
        self._producers = producers
        self._queues: dict[int, asyncio.Future[None]] = {}  # producer id -> the last in line

    async def verify(
        self, transactional_id: str | None, partitions: Sequence[m.ProducePartition], version: int
    ) -> dict[int, KafkaError]:
        """The refusals of a Produce's partitions, by index; the caller appends the rest before
        its next await (module Rules)."""
        if not transactional_id:
            return {}
        headers = {
            i: header
            for i, p in enumerate(partitions)
            if (header := first_transactional_header(p.records)) is not None
        }
        if not headers:
            return {}
        producer_id = next(iter(headers.values())).producer_id
        ahead = self._queues.get(producer_id)
        if ahead is None and not self._needing(partitions, headers):
            return {}
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queues[producer_id] = mine
        try:
            if ahead is not None:
                await asyncio.wait((ahead,))  # never cancels the request ahead
            return await self._verified(
                transactional_id, partitions, headers, operation_for_produce(version)
            )
        finally:
            if self._queues.get(producer_id) is mine:
                del self._queues[producer_id]
            mine.set_result(None)  # the next in line resumes after this task's append

    def _needing(
        self, partitions: Sequence[m.ProducePartition], headers: dict[int, BatchHeader]
    ) -> dict[int, ProducerEntry | None]:
        """The partitions to ask about, each with its producer's entry as it is now."""
        needing: dict[int, ProducerEntry | None] = {}
        for i, header in headers.items():
            p = partitions[i]
            led, entry = self._producers(p.topic, p.partition, header.producer_id)
            if led and needs_verification(entry, header.producer_epoch):
                needing[i] = entry
        return needing

    async def _verified(
        self,
        transactional_id: str,
        partitions: Sequence[m.ProducePartition],
        headers: dict[int, BatchHeader],
        operation: TxnOperation,
    ) -> dict[int, KafkaError]:
        loop = asyncio.get_running_loop()
        began = loop.time()
        while True:
            needing = self._needing(partitions, headers)
            if not needing:
                return {}
            first = headers[next(iter(needing))]
            asked = tuple((partitions[i].topic, partitions[i].partition) for i in needing)
            answers = await self._verifier.ask(
                m.TxnPartitionsRequest(
                    transactional_id,
                    first.producer_id,
                    first.producer_epoch,
                    asked,
                    verify_only=not operation.adds,
                )
            )
            elapsed_ms = (loop.time() - began) * 1000
            delay_ms = add_retry_delay_ms(answers.values(), operation, elapsed_ms)
            if delay_ms is None:
                break
            await asyncio.sleep(delay_ms / 1000)
        refusals: dict[int, KafkaError] = {}
        for i, before in needing.items():
            p, header = partitions[i], headers[i]
            where = f"{p.topic}-{p.partition} (transactional id {transactional_id!r})"
            error = answers.get((p.topic, p.partition))
            if error is not None:
                refusals[i] = client_error(error, operation, produce=True, where=where)
                continue
            _, now = self._producers(p.topic, p.partition, header.producer_id)
            if not still_verified(before, now, header.producer_epoch):
                refusals[i] = InvalidTxnStateError(
                    f"{where}: producer {header.producer_id}'s transaction was aborted at a later "
                    "epoch while the partition was verified; the record is not part of an "
                    "ongoing transaction"
                )
        return refusals
