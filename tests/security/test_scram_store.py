"""A broker's SCRAM credentials replayed from the metadata log, looked up by its SCRAM server."""

from __future__ import annotations

import pytest

from replog.common.scram_mechanism import SCRAM_SHA_256, SCRAM_SHA_512
from replog.errors import MetadataReplayError, SaslAuthenticationFailedError
from replog.quorum.metadata.record_codec import decode_record, encode_record
from replog.quorum.metadata.records import RemoveUserScramCredentialRecord
from replog.security.scram_client import ScramClient
from replog.security.scram_credential import derive_credential
from replog.security.scram_server import ScramServer
from replog.security.scram_store import ScramStore, record_of

SALT = b"salt-of-sixteen!"


def authenticates(store: ScramStore, user: str, password: str) -> bool:
    client = ScramClient(SCRAM_SHA_512, user, password, "c")
    server = ScramServer(SCRAM_SHA_512, store.lookup(SCRAM_SHA_512), "s")
    try:
        final = client.respond(server.respond(client.respond(b"") or b""))
        assert final is not None
        client.respond(server.respond(final))
    except SaslAuthenticationFailedError:
        return False
    return client.complete and server.complete


def test_a_replayed_credential_authenticates_its_user_for_its_mechanism_only() -> None:
    store = ScramStore()
    record = record_of("alice", SCRAM_SHA_512, derive_credential(SCRAM_SHA_512, "pw", SALT, 4096))
    assert b"pw" not in encode_record(record)
    store.replay(decode_record(encode_record(record)))  # type: ignore[arg-type]
    assert authenticates(store, "alice", "pw")
    assert not authenticates(store, "alice", "other")
    assert not authenticates(store, "bob", "pw")
    assert store.lookup(SCRAM_SHA_256)("alice") is None
    assert store.mechanisms_of("alice") == [SCRAM_SHA_512.code]


def test_a_new_password_replaces_the_old_and_a_removal_revokes_it() -> None:
    store = ScramStore()
    for password in ("old", "new"):
        credential = derive_credential(SCRAM_SHA_512, password, SALT, 4096)
        store.replay(record_of("alice", SCRAM_SHA_512, credential))
    assert len(store) == 1
    assert authenticates(store, "alice", "new") and not authenticates(store, "alice", "old")
    store.replay(RemoveUserScramCredentialRecord("alice", SCRAM_SHA_512.code))
    assert not authenticates(store, "alice", "new")
    with pytest.raises(MetadataReplayError, match="does not have"):
        store.replay(RemoveUserScramCredentialRecord("alice", SCRAM_SHA_512.code))
