"""ListTransactions' filters (states, producer ids, duration, id pattern; unknown state names;
a bad pattern) and DescribeTransactions of an unknown or Dead id."""

from __future__ import annotations

import pytest

from replog.coordinator.transaction_listing import (
    Listing,
    describe,
    list_transactions,
    unknown_states,
)
from replog.coordinator.transaction_metadata import TxnMetadata, TxnState
from replog.errors import InvalidRegularExpressionError, TransactionalIdNotFoundError

METAS = [
    TxnMetadata("pay-1", 1, producer_epoch=0, state=TxnState.ONGOING, start_ms=1000),
    TxnMetadata("pay-2", 2, producer_epoch=0, state=TxnState.EMPTY),
    TxnMetadata("ship-1", 3, producer_epoch=0, state=TxnState.PREPARE_COMMIT, start_ms=4000),
    TxnMetadata("old", 4, producer_epoch=0, state=TxnState.DEAD),
]


def ids(listing: Listing, now_ms: int = 5000) -> list[str]:
    return [m.transactional_id for m in list_transactions(METAS, listing, now_ms)]


def test_every_filter_must_hold_and_dead_ids_never_show() -> None:
    assert ids(Listing()) == ["pay-1", "pay-2", "ship-1"]
    assert ids(Listing(states=frozenset({"Ongoing", "PrepareCommit"}))) == ["pay-1", "ship-1"]
    assert ids(Listing(producer_ids=frozenset({2, 3, 4}))) == ["pay-2", "ship-1"]
    assert ids(Listing(duration_ms=1000)) == ["pay-1", "ship-1"]
    assert ids(Listing(duration_ms=1001)) == ["pay-1"]  # Empty has not started: never
    assert ids(Listing(pattern="pay-.")) == ["pay-1", "pay-2"]
    assert ids(Listing(pattern="pay")) == []  # the whole id must match
    assert ids(Listing(states=frozenset({"Ongoing"}), pattern="ship.*")) == []
    assert ids(Listing(states=frozenset({"Dead"}))) == []


def test_unknown_states_and_bad_patterns() -> None:
    listing = Listing(states=frozenset({"Ongoing", "Running", "ongoing"}))
    assert unknown_states(listing) == ["Running", "ongoing"]
    with pytest.raises(InvalidRegularExpressionError, match=r"pattern '\['"):
        ids(Listing(pattern="["))


def test_describe_an_unknown_or_dead_id() -> None:
    by_id = {m.transactional_id: m for m in METAS}
    assert describe(by_id, "pay-1") is METAS[0]
    for missing in ("old", "nope"):
        assert isinstance(describe(by_id, missing), TransactionalIdNotFoundError)
