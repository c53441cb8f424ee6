"""DescribeUserScramCredentials' answers (`scram_describe`), Kafka's ScramImage.describe rules."""

from __future__ import annotations

from replog.errors import DuplicateResourceError, ResourceNotFoundError
from replog.security.scram_describe import describe_credentials

STORED = {("alice", 2): 8192, ("alice", 1): 4096, ("bob", 1): 10000}


def test_every_user_when_none_is_named_with_mechanisms_by_code() -> None:
    for asked in (None, []):
        answers = describe_credentials(STORED, asked)
        assert [(a.user, a.error, a.credentials) for a in answers] == [
            ("alice", None, ((1, 4096), (2, 8192))),
            ("bob", None, ((1, 10000),)),
        ]


def test_named_users_each_once_unknown_and_duplicate_ones_refused() -> None:
    answers = describe_credentials(STORED, ["bob", "carol", "alice", "bob"])
    assert [a.user for a in answers] == ["bob", "carol", "alice"]
    bob, carol, alice = answers
    assert isinstance(bob.error, DuplicateResourceError) and bob.credentials == ()
    assert str(bob.error).endswith("in a single request: bob")
    assert isinstance(carol.error, ResourceNotFoundError)
    assert str(carol.error) == "Attempt to describe a user credential that does not exist: carol"
    assert alice.error is None and alice.credentials == ((1, 4096), (2, 8192))
