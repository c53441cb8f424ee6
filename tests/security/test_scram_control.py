"""AlterUserScramCredentials decisions (`scram_control`), one scenario per rule of Kafka's
ScramControlManager: records written only for accepted changes, one answer per user."""

from __future__ import annotations

import pytest

from replog.common.scram_mechanism import SCRAM_SHA_512
from replog.errors import (
    DuplicateResourceError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
)
from replog.quorum.metadata.records import RemoveUserScramCredentialRecord
from replog.security.scram_client import ScramClient
from replog.security.scram_control import ScramDeletion, ScramUpsertion, alter_credentials
from replog.security.scram_credential import salted_password
from replog.security.scram_server import ScramServer
from replog.security.scram_store import ScramStore

SALT = b"sixteen byte slt"


def upsertion(
    name: str, password: str = "pw", iterations: int = 4096, mechanism: int = 2
) -> ScramUpsertion:
    salted = salted_password(SCRAM_SHA_512, password, SALT, max(iterations, 1))
    return ScramUpsertion(name, mechanism, iterations, SALT, salted)


def signs_in(store: ScramStore, user: str, password: str) -> bool:
    client = ScramClient(SCRAM_SHA_512, user, password, "c")
    server = ScramServer(SCRAM_SHA_512, store.lookup(SCRAM_SHA_512), "s")
    final = client.respond(server.respond(client.respond(b"") or b""))
    assert final is not None
    client.respond(server.respond(final))
    return client.complete


def test_an_upsertion_writes_the_keys_of_the_salted_password_and_the_user_signs_in() -> None:
    store = ScramStore()
    change = upsertion("alice", "secret")
    records, answers = alter_credentials(store, [], [change])
    assert answers == {"alice": None}
    (record,) = records
    assert change.salted_password not in (record.salt, record.stored_key, record.server_key)
    assert "salted_password" not in repr(change) and "salt=" not in repr(change)
    store.replay(record)
    assert signs_in(store, "alice", "secret")
    records, answers = alter_credentials(store, [ScramDeletion("alice", 2)], [])
    assert records == [RemoveUserScramCredentialRecord("alice", 2)] and answers == {"alice": None}


def test_a_user_altered_twice_fails_and_nothing_is_written_for_it() -> None:
    store = ScramStore()
    for record in alter_credentials(store, [], [upsertion("alice")])[0]:
        store.replay(record)
    records, answers = alter_credentials(
        store,
        [ScramDeletion("alice", 2)],
        [upsertion("alice", mechanism=1), upsertion("bob")],
    )
    assert isinstance(answers["alice"], DuplicateResourceError)
    assert answers["bob"] is None and [r.name for r in records] == ["bob"]
    # A user whose first change failed is not looked at again.
    _, answers = alter_credentials(store, [ScramDeletion("carol", 2)], [upsertion("carol")])
    assert isinstance(answers["carol"], ResourceNotFoundError)


def test_below_the_scram_metadata_version_every_user_is_unsupported_version() -> None:
    """Kafka's ScramControlManager below 3.5-IV2: every user is UNSUPPORTED_VERSION, before
    any other check (a bad mechanism, a missing credential), and nothing is written."""
    records, answers = alter_credentials(
        ScramStore(),
        [ScramDeletion("carol", 2), ScramDeletion("dave", 3)],
        [upsertion("alice"), upsertion("bob"), upsertion("bob", mechanism=1)],
        scram_supported=False,
    )
    assert records == []
    assert {user: type(answer) for user, answer in answers.items()} == {
        "carol": UnsupportedVersionError,
        "dave": UnsupportedVersionError,
        "alice": UnsupportedVersionError,
        "bob": UnsupportedVersionError,
    }
    assert str(answers["alice"]) == "The current metadata.version does not support SCRAM"
    assert UnsupportedVersionError.code == 35  # Kafka's UNSUPPORTED_VERSION
    # bob's second change is no duplicate: his first failed, so it is not looked at.


@pytest.mark.parametrize(
    ("deletions", "upsertions", "error", "message"),
    [
        ([ScramDeletion("", 2)], [], UnacceptableCredentialError, "Username must not be empty"),
        ([ScramDeletion("a", 3)], [], UnsupportedSaslMechanismError, "Unknown SCRAM mechanism"),
        ([ScramDeletion("a", 1)], [], ResourceNotFoundError, "does not exist"),
        ([], [upsertion("a", iterations=4095)], UnacceptableCredentialError, "Too few"),
        ([], [upsertion("a", iterations=16385)], UnacceptableCredentialError, "Too many"),
        ([], [upsertion("a", mechanism=0)], UnsupportedSaslMechanismError, "Unknown SCRAM"),
        (
            [],
            [ScramUpsertion("a", 1, 4096, SALT, bytes(64))],
            UnacceptableCredentialError,
            "SCRAM-SHA-256 salted password is 32 bytes, got 64",
        ),
    ],
)
def test_each_refusal_names_its_cause(
    deletions: list[ScramDeletion],
    upsertions: list[ScramUpsertion],
    error: type[Exception],
    message: str,
) -> None:
    records, answers = alter_credentials(ScramStore(), deletions, upsertions)
    (answer,) = answers.values()
    assert records == [] and isinstance(answer, error) and message in str(answer)
