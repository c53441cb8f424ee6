"""Replog's OffsetCommit tags (`replog.wire.shared_commit_tags`): what each side writes is what
the other reads, no tag means no committer instance and no shared commits, and bytes that do
not decode are a typed error naming the tag."""

from __future__ import annotations

import pytest

from replog.coordinator import messages as cm
from replog.errors import InvalidRequestError, MalformedResponseError
from replog.wire import shared_commit_tags as tags

OTHER = cm.SharedCommit(
    cm.Committer("reader-b", "0f3c", "10.0.0.2"), (("t", 0), ("t", 3), ("u", 1)), 1_250
)


def test_the_committer_round_trips_with_the_headers_client_id_and_the_peers_host() -> None:
    written = tags.committer_tags(cm.Committer("ignored", "instance-7"))
    assert written == ((tags.COMMITTER_TAG, b"instance-7"),)
    assert tags.committer_from_tags(written, "reader-a", "10.0.0.1") == cm.Committer(
        "reader-a", "instance-7", "10.0.0.1"
    )


def test_no_instance_no_tag_and_no_tag_no_instance() -> None:
    assert tags.committer_tags(cm.NO_COMMITTER) == ()
    assert tags.committer_from_tags((), "app", "h") == cm.Committer("app", "", "h")
    assert tags.committer_from_tags(((3, b"a tag of Kafka's"),), "app", "") == cm.Committer("app")


def test_shared_commits_round_trip() -> None:
    written = tags.shared_tags((OTHER, OTHER))
    ((tag, _),) = written
    assert tag == tags.SHARED_COMMITS_TAG
    assert tags.shared_from_tags(written, "b1:9092") == (OTHER, OTHER)
    assert tags.shared_tags(()) == ()
    assert tags.shared_from_tags(((5, b"other"),), "b1:9092") == ()


def test_undecodable_tags_are_typed_errors_naming_the_tag() -> None:
    with pytest.raises(InvalidRequestError, match=r"committer tag \(27001\) is not UTF-8"):
        tags.committer_from_tags(((tags.COMMITTER_TAG, b"\xff\xfe"),), "app", "")
    for bad in (b"not json", b'[{"client_id": "a"}]', b"[1]"):
        with pytest.raises(
            MalformedResponseError, match=r"b1:9092 answered OffsetCommit with a shared-commits tag"
        ):
            tags.shared_from_tags(((tags.SHARED_COMMITS_TAG, bad),), "b1:9092")
