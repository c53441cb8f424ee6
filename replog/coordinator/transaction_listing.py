"""Which transactions a coordinator lists (ListTransactions) and what it answers a
DescribeTransactions of one transactional id (Kafka's `TransactionStateManager
.listTransactionStates` and `TransactionCoordinator.handleDescribeTransactions`).

Rules:
- ListTransactions keeps a transactional id when every filter given holds: its state's name is
  among the state filters, its producer id among the producer id filters, it has run for at
  least the duration filter (now minus its start time; a transaction that has not started
  never qualifies), and its id matches the pattern in full (v2). Empty filters, a negative
  duration and a null or empty pattern hold for every id. Dead ids are never listed.
- A state filter that names no state is returned as unknown (its filter matches nothing).
- A pattern that does not compile is INVALID_REGULAR_EXPRESSION.
- DescribeTransactions of an id not held, or held as Dead, is TRANSACTIONAL_ID_NOT_FOUND.
Pure: times are arguments.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from replog.coordinator.transaction_metadata import TxnMetadata, TxnState
from replog.errors import InvalidRegularExpressionError, KafkaError, TransactionalIdNotFoundError

__all__ = ["Listing", "describe", "list_transactions", "unknown_states"]

STATE_NAMES = frozenset(state.display_name for state in TxnState)


@dataclass(frozen=True, slots=True)
class Listing:
    """The filters of one ListTransactions."""

    states: frozenset[str] = frozenset()
    producer_ids: frozenset[int] = frozenset()
    duration_ms: int = -1
    pattern: str | None = None


def unknown_states(listing: Listing) -> list[str]:
    return sorted(listing.states - STATE_NAMES)


def list_transactions(
    metas: Iterable[TxnMetadata], listing: Listing, now_ms: int
) -> list[TxnMetadata]:
    """The transactions `listing` keeps, by transactional id; InvalidRegularExpressionError
    for a pattern that does not compile."""
    matcher = None
    if listing.pattern:
        try:
            matcher = re.compile(listing.pattern)
        except re.error as error:
            raise InvalidRegularExpressionError(
                f"transactional id pattern {listing.pattern!r}: {error}"
            ) from None
    kept = [
        meta
        for meta in metas
        if meta.state is not TxnState.DEAD
        and (not listing.states or meta.state.display_name in listing.states)
        and (not listing.producer_ids or meta.producer_id in listing.producer_ids)
        and (
            listing.duration_ms < 0
            or (meta.start_ms >= 0 and now_ms - meta.start_ms >= listing.duration_ms)
        )
        and (matcher is None or matcher.fullmatch(meta.transactional_id) is not None)
    ]
    return sorted(kept, key=lambda meta: meta.transactional_id)


def describe(metas: Mapping[str, TxnMetadata], transactional_id: str) -> TxnMetadata | KafkaError:
    meta = metas.get(transactional_id)
    if meta is None or meta.state is TxnState.DEAD:
        return TransactionalIdNotFoundError(
            f"transactional id {transactional_id!r} is not known to its coordinator"
        )
    return meta
