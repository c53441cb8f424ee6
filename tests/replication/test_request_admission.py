"""`request_admission`: the refusals made before a replica is looked up."""

from __future__ import annotations

import pytest

from replog.errors import InvalidRequiredAcksError, InvalidTopicError
from replog.replication.request_admission import internal_topic_error, invalid_acks_error


@pytest.mark.parametrize("acks", [0, 1, -1])
def test_kafkas_acks_are_valid(acks: int) -> None:
    assert invalid_acks_error("t", 0, acks) is None


@pytest.mark.parametrize("acks", [2, -2, 3])
def test_other_acks_are_invalid_required_acks_naming_the_partition(acks: int) -> None:
    error = invalid_acks_error("t", 4, acks)
    assert isinstance(error, InvalidRequiredAcksError)
    assert str(error) == f"t-4: acks={acks}; only 0, 1 and -1 are valid"


def test_internal_topics_are_refused_naming_what_was_tried() -> None:
    error = internal_topic_error("__consumer_offsets", 3, "append to")
    assert isinstance(error, InvalidTopicError)
    assert "cannot append to internal topic '__consumer_offsets'" in str(error)
    assert internal_topic_error("orders", 3, "append to") is None
