"""TxnMarkerSender: writes the COMMIT or ABORT markers of one Prepare* transaction to the
leaders of its partitions, and says when every partition has its marker (Kafka's
`TransactionMarkerChannelManager`).

Theory of operation: `write` plans an attempt with `transaction_markers.plan_markers` (one
marker per leader, from the coordinator's metadata image as it is then), sends the leaders
their markers at once through a `MarkerChannel`, and reads each partition's answer with
`marker_outcome`: done and dropped partitions leave the set, fenced ones end the write, the
others are planned again after a backoff (100 ms, doubling up to 1 s), so a partition whose
leader moved gets its marker from the new leader. The channel is the cluster's RPC to a
broker (WriteTxnMarkers on the Broker service; tests pass fakes).

Rules:
- `write` returns True once no partition remains (the coordinator then appends Complete*),
  False when a partition answered that a newer coordinator owns the transaction or when
  `current()` turns False (the coordinator lost the `__transaction_state` partition: the next
  one sends the markers again after its load).
- A channel call that raises is a retriable failure of every partition it carried, logged
  once per write at INFO (again at DEBUG).
- An unexpected partition error is retried and logged at ERROR (`transaction_markers`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

from replog.common.topic_partition import TopicPartitionKey
from replog.coordinator.transaction_markers import (
    Leaders,
    MarkerOutcome,
    TxnMarker,
    marker_outcome,
    plan_markers,
)
from replog.coordinator.transaction_metadata import TxnMetadata
from replog.errors import KafkaError, RequestTimedOutError, UnknownServerError

log = logging.getLogger("replog.server.transactions")

BACKOFF_MS = (100, 1000)  # the first retry's backoff, and the largest


class MarkerChannel(Protocol):
    """Sends WriteTxnMarkers to one broker: per marker, in order, each partition's error
    (None: its marker is written)."""

    def send(
        self, broker_id: int, markers: Sequence[TxnMarker]
    ) -> Awaitable[list[Mapping[TopicPartitionKey, KafkaError | None]]]: ...


Sleep = Callable[[float], Awaitable[None]]


class TxnMarkerSender:
    """Writes the markers of Prepare* transactions (module docstring)."""

    def __init__(
        self,
        broker_id: int,
        channel: MarkerChannel,
        leaders: Leaders,
        *,
        sleep: Sleep = asyncio.sleep,
        backoff_ms: tuple[int, int] = BACKOFF_MS,
    ) -> None:
        self.broker_id = broker_id
        self._channel = channel
        self._leaders = leaders
        self._sleep = sleep
        self._backoff_ms = backoff_ms

    async def write(
        self, meta: TxnMetadata, coordinator_epoch: int, current: Callable[[], bool]
    ) -> bool:
        """Every partition of `meta` marked (module Rules)."""
        remaining = set(meta.partitions)
        backoff_ms = self._backoff_ms[0]
        attempt = 0
        who = f"transactional id {meta.transactional_id!r} (producer id {meta.producer_id})"
        while remaining:
            if not current():
                return False
            plan = plan_markers(meta, coordinator_epoch, remaining, self._leaders)
            if plan.dropped:
                log.info(
                    "broker %d: %s: no marker for %s: gone from the metadata",
                    self.broker_id,
                    who,
                    sorted(plan.dropped),
                )
                remaining -= plan.dropped
            answers = await asyncio.gather(
                *(
                    self._send(broker, marker, first=attempt == 0)
                    for broker, marker in plan.by_broker.items()
                )
            )
            attempt += 1
            for broker, answer in zip(plan.by_broker, answers, strict=True):
                for tp, error in answer.items():
                    outcome = marker_outcome(error)
                    if outcome is MarkerOutcome.FENCED:
                        log.info(
                            "broker %d: %s: broker %d answered %s for %s: a newer "
                            "coordinator owns the transaction; its markers are left to it",
                            self.broker_id,
                            who,
                            broker,
                            error and error.error_name,
                            tp,
                        )
                        return False
                    if outcome in (MarkerOutcome.DONE, MarkerOutcome.DROPPED):
                        remaining.discard(tp)
                    if outcome is MarkerOutcome.DROPPED:
                        log.warning(
                            "broker %d: %s: %s cannot hold a marker (%s); given up",
                            self.broker_id,
                            who,
                            tp,
                            error and error.error_name,
                        )
                    elif outcome is MarkerOutcome.UNEXPECTED:
                        log.error(
                            "broker %d: %s: broker %d answered the marker of %s with %s: %s "
                            "(sent again)",
                            self.broker_id,
                            who,
                            broker,
                            tp,
                            error and error.error_name,
                            error,
                        )
            if remaining:
                await self._sleep(backoff_ms / 1000)
                backoff_ms = min(2 * backoff_ms, self._backoff_ms[1])
        return True

    async def _send(
        self, broker: int, marker: TxnMarker, *, first: bool
    ) -> Mapping[TopicPartitionKey, KafkaError | None]:
        """The channel's answer for `marker`; a failed call is every partition's retriable
        failure, logged at INFO on a write's first attempt and at DEBUG after it."""
        try:
            (answer,) = await self._channel.send(broker, [marker])
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the leader is unreachable or failing: sent again
            failure: KafkaError = (
                error if isinstance(error, KafkaError) else UnknownServerError(str(error))
            )
            log.log(
                logging.INFO if first else logging.DEBUG,
                "broker %d: WriteTxnMarkers to broker %d failed (sent again): %s: %s",
                self.broker_id,
                broker,
                type(error).__name__,
                error,
            )
            if not failure.retriable:
                failure = RequestTimedOutError(f"broker {broker}: {failure}")
            return dict.fromkeys(marker.partitions, failure)
        missing = [tp for tp in marker.partitions if tp not in answer]
        if missing:
            unanswered = RequestTimedOutError(f"broker {broker} did not answer for {missing}")
            return {**answer, **dict.fromkeys(missing, unanswered)}
        return answer
