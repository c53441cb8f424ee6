"""The consumer's assignment/subscription bookkeeping and per-partition positions."""

from __future__ import annotations

import re

import pytest

from replog.client.records import OffsetAndMetadata, TopicPartition
from replog.client.subscription import (
    EARLIEST,
    LATEST,
    Mode,
    SubscriptionState,
    topic_pattern,
)
from replog.errors import IllegalStateError, InvalidRegularExpressionError

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_assign_keeps_the_state_of_partitions_that_stay() -> None:
    subs = SubscriptionState()
    subs.assign([A0, A1])
    subs.seek(A0, 5)
    subs.assign([A0, B0, A0])  # duplicates collapse
    assert subs.assignment() == {A0, B0}
    assert subs.state(A0, "t").position == 5
    assert subs.state(B0, "t").position is None
    assert subs.topics() == {"a", "b"}
    subs.assign([])
    assert subs.mode is Mode.NONE


def test_a_partition_assigned_again_awaits_its_position_afresh() -> None:
    """A state read before an await is the partition's only while it stays assigned: one that
    left and came back is a new state, so an answer asked for the old one does not apply."""
    subs = SubscriptionState()
    subs.assign([A0, A1])
    asked = subs.state(A0, "t")
    assert subs.awaits_position(A0, asked)
    subs.assign([A1])
    assert not subs.awaits_position(A0, asked)
    subs.assign([A0, A1])
    assert not subs.awaits_position(A0, asked)
    assert subs.awaits_position(A0, subs.state(A0, "t"))
    kept = subs.state(A1, "t")
    subs.request_reset(A1, EARLIEST)  # a seek while the answer was out wins
    assert not subs.awaits_position(A1, kept)


def test_subscribe_follows_the_metadata_and_excludes_assign() -> None:
    subs = SubscriptionState()
    subs.subscribe(["a"])
    assert subs.assignment() == frozenset() and subs.topics() == {"a"}
    assert subs.set_subscribed_partitions([A0, A1, B0])  # b is not subscribed
    assert subs.assignment() == {A0, A1}
    assert not subs.set_subscribed_partitions([A1, A0])  # unchanged
    subs.seek(A1, 3)
    assert subs.set_subscribed_partitions([A1])
    assert subs.state(A1, "t").position == 3
    with pytest.raises(IllegalStateError, match=r"assign\(\) after subscribe\(\)"):
        subs.assign([A0])
    subs.subscribe([])  # == unsubscribe
    assert subs.mode is Mode.NONE
    subs.assign([A0])
    with pytest.raises(IllegalStateError, match=r"subscribe\(\) after assign\(\)"):
        subs.subscribe(["a"])


def test_a_pattern_subscribes_to_the_whole_names_it_matches() -> None:
    subs = SubscriptionState()
    subs.subscribe_pattern(re.compile(r"a|b\d"))
    assert subs.mode is Mode.SUBSCRIBED and subs.subscription == frozenset()
    assert subs.match(["a", "ab", "b1", "b12", "__consumer_offsets", "c"])
    assert subs.subscription == {"a", "b1"}  # whole names only, internal topics never
    assert subs.set_subscribed_partitions([A0, A1, TopicPartition("b1", 0), B0])
    subs.seek(A0, 7)
    assert not subs.match(["b1", "a"])  # unchanged
    assert subs.match(["a"])  # b1 gone: its partition leaves, a's stay with their positions
    assert subs.assignment() == {A0, A1} and subs.state(A0, "t").position == 7
    subs.subscribe_pattern(re.compile("a.*"))  # a new pattern keeps what it still matches
    assert subs.subscription == {"a"} and subs.assignment() == {A0, A1}
    subs.subscribe(["b"])  # by names again: no pattern, match changes nothing
    assert subs.pattern is None and not subs.match(["a", "b"])
    assigned = SubscriptionState()
    assigned.assign([A0])
    with pytest.raises(IllegalStateError, match=r"pattern=\.\.\.\) after assign\(\)"):
        assigned.subscribe_pattern(re.compile("a"))


def test_a_pattern_the_coordinator_matches_takes_internal_topics() -> None:
    subs = SubscriptionState()
    subs.subscribe_pattern(re.compile(r"__consumer.*|a"), internal=True)
    assert subs.match(["a", "__consumer_offsets", "c"])
    assert subs.subscription == {"a", "__consumer_offsets"}


def test_topic_pattern_compiles_or_names_what_is_wrong() -> None:
    assert topic_pattern("t.*", sent=True).pattern == "t.*"
    assert topic_pattern("(?i)t", sent=True).fullmatch("T")  # inline flags travel with the text
    assert topic_pattern(re.compile("t", re.I), sent=False).fullmatch("T")
    with pytest.raises(InvalidRegularExpressionError, match=r"pattern '\[' does not compile"):
        topic_pattern("[", sent=False)
    with pytest.raises(TypeError, match="not bytes"):
        topic_pattern(b"t", sent=False)
    with pytest.raises(ValueError, match=r"write them inline, as \(\?i\)"):
        topic_pattern(re.compile("t", re.I), sent=True)


def test_positions_resets_and_what_to_commit() -> None:
    subs = SubscriptionState()
    subs.assign([A0, A1, B0])
    assert subs.missing_positions() == [A0, A1, B0]
    subs.request_reset(A0, EARLIEST)
    subs.seek(A1, 7)
    assert subs.missing_positions() == [B0]
    assert subs.pending_resets() == {A0: EARLIEST}
    subs.request_reset(A1, LATEST)  # a reset wins over the position until it is looked up
    assert not subs.state(A1, "t").fetchable
    subs.seek(A1, 8)  # a seek cancels it
    assert subs.pending_resets() == {A0: EARLIEST}
    assert not subs.has_all_positions()
    subs.state(A1, "t").last_epoch = 3
    assert subs.consumed() == {A1: OffsetAndMetadata(8, "", 3)}


def test_pause_keeps_the_position_and_stops_fetching() -> None:
    subs = SubscriptionState()
    subs.assign([A0])
    subs.seek(A0, 1)
    subs.pause(A0)
    assert subs.paused() == {A0} and not subs.state(A0, "t").fetchable
    subs.resume(A0)
    assert subs.state(A0, "t").fetchable


def test_bad_input_and_unassigned_partitions_raise_typed_errors() -> None:
    subs = SubscriptionState()
    with pytest.raises(TypeError, match="TopicPartition"):
        subs.assign([("a", -1)])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="non-empty strings"):
        subs.subscribe([""])
    subs.assign([A0])
    with pytest.raises(ValueError, match=r"a-0 must be an int in \[0, 9223372036854775807\]"):
        subs.seek(A0, -3)
    with pytest.raises(ValueError, match="got 9223372036854775808"):
        subs.seek(A0, 2**63)  # no int64: a fetch could not even be encoded
    with pytest.raises(IllegalStateError, match=r"seek: partition b-0 is not assigned .*a-0"):
        subs.seek(B0, 1)
    with pytest.raises(IllegalStateError, match="pause"):
        subs.pause(B0)
