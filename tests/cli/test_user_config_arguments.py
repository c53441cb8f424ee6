"""`replog configs --entity-type users`' arguments read as kafka-configs.sh reads them
(`user_configs.scram_changes`), and the request the admin client builds from them: salted here,
the password never sent."""

from __future__ import annotations

import pytest

from replog.admin.user_scram_credentials import (
    ScramUserDeletion,
    ScramUserUpsertion,
    alter_request,
    random_salt,
)
from replog.cli.configs import parse_add_config, parse_delete_config
from replog.cli.user_configs import java_exception_name, scram_changes
from replog.common.scram_mechanism import SCRAM_SHA_512
from replog.errors import ReplogError, ResourceNotFoundError
from replog.security.scram_credential import salted_password


def test_add_and_delete_configs_become_upsertions_and_deletions() -> None:
    added = parse_add_config(
        "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=p]"
    )
    deletions, upsertions = scram_changes("alice", added, parse_delete_config("scram-sha-256"))
    assert deletions == [ScramUserDeletion("alice", "SCRAM-SHA-256")]
    assert upsertions == [
        ScramUserUpsertion("alice", "SCRAM-SHA-256", "alice-secret", 8192),
        ScramUserUpsertion("alice", "SCRAM-SHA-512", "p", 4096),
    ]
    assert "alice-secret" not in repr(upsertions)


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        ("consumer_byte_rate=1024", "not a SCRAM mechanism"),
        ("SCRAM-SHA-512=[iterations=8192]", "password is required"),
        ("SCRAM-SHA-512=[salt=abc,password=p]", "got a field 'salt'"),
        ("SCRAM-SHA-512=[iterations=many,password=p]", "iterations='many' is not a number"),
    ],
)
def test_bad_values_are_refused(text: str, cause: str) -> None:
    with pytest.raises(ReplogError, match=cause):
        scram_changes("alice", parse_add_config(text), [])


def test_the_request_carries_a_salted_password_never_the_password() -> None:
    request = alter_request(
        [ScramUserDeletion("bob", "SCRAM-SHA-256")],
        [ScramUserUpsertion("alice", "SCRAM-SHA-512", "alice-secret", 8192)],
    )
    (upsertion,) = request.upsertions
    assert (upsertion.name, upsertion.mechanism, upsertion.iterations) == ("alice", 2, 8192)
    assert upsertion.salted_password == salted_password(
        SCRAM_SHA_512, "alice-secret", upsertion.salt, 8192
    )
    assert b"alice-secret" not in upsertion.salt + upsertion.salted_password
    assert [(d.name, d.mechanism) for d in request.deletions] == [("bob", 1)]
    salts = {random_salt() for _ in range(20)}
    assert len(salts) == 20 and all(s.isalnum() and len(s) >= 20 for s in salts)


def test_errors_print_as_kafkas_exception_names() -> None:
    assert java_exception_name(ResourceNotFoundError("x")) == "ResourceNotFoundException"
