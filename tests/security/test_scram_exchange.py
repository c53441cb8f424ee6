"""SCRAM's exchanges: the RFC's worked examples (RFC 5802 with SHA-1, RFC 7677 with SHA-256)
byte for byte from both sides, any user and password round-tripping, and every way an exchange
fails: a wrong password, an unknown user, tampered or malformed messages, out of order."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.common.scram_mechanism import (
    SCRAM_MECHANISMS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramMechanism,
)
from replog.errors import (
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnacceptableCredentialError,
)
from replog.security.scram_client import ScramClient
from replog.security.scram_credential import (
    ScramCredential,
    credential_from_salted_password,
    derive_credential,
    salted_password,
)
from replog.security.scram_messages import parse_client_first, sasl_name, username_of
from replog.security.scram_server import ScramServer

# SHA-1 is no Kafka mechanism; RFC 5802's own example uses it, and the exchange is the same.
SCRAM_SHA_1 = ScramMechanism("SCRAM-SHA-1", "sha1", 0, 20)

RFC_EXAMPLES = [
    (
        SCRAM_SHA_1,
        "fyko+d2lbbFgONRv9qkxdawL",
        "3rfcNHYJY1ZVvWVs7j",
        "QSXCR+Q6sek8bf92",
        "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
        "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
        "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
        "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
    ),
    (
        SCRAM_SHA_256,
        "rOprNGfwEbeRWgbNEkqO",
        "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        "W22ZaJ0SNY7soEsUEjb6gQ==",
        "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
    ),
]
SALT = b"0123456789abcdef"


@pytest.mark.parametrize("example", RFC_EXAMPLES, ids=lambda e: e[0].mechanism_name)
def test_the_rfc_examples_from_both_sides(example: tuple[object, ...]) -> None:
    mechanism, cnonce, snonce, salt, first, server_first, final, server_final = example
    assert isinstance(mechanism, ScramMechanism) and isinstance(salt, str)
    credential = derive_credential(mechanism, "pencil", base64.b64decode(salt), 4096)
    client = ScramClient(mechanism, "user", "pencil", str(cnonce))
    server = ScramServer(mechanism, {"user": credential}.get, str(snonce))
    assert client.respond(b"") == str(first).encode()
    assert server.respond(str(first).encode()) == str(server_first).encode()
    assert client.respond(str(server_first).encode()) == str(final).encode()
    assert server.respond(str(final).encode()) == str(server_final).encode()
    assert client.respond(str(server_final).encode()) is None
    assert server.complete and client.complete and server.authorization_id == "user"


def exchange(
    mechanism: ScramMechanism,
    user: str,
    password: str,
    credential: ScramCredential | None,
    stored_as: str | None = None,
) -> tuple[ScramClient, ScramServer, bytes]:
    """Client and server up to the client's final message (not yet answered)."""
    stored = {stored_as if stored_as is not None else user: credential} if credential else {}
    client = ScramClient(mechanism, user, password, "clientnonce")
    server = ScramServer(mechanism, stored.get, "servernonce")
    final = client.respond(server.respond(client.respond(b"") or b""))
    assert final is not None
    return client, server, final


@settings(max_examples=30, deadline=None)
@given(
    mechanism=st.sampled_from(SCRAM_MECHANISMS),
    user=st.text(st.characters(min_codepoint=1, max_codepoint=127), min_size=1, max_size=12),
    password=st.text(max_size=12),
)
def test_any_user_and_password_round_trip(
    mechanism: ScramMechanism, user: str, password: str
) -> None:
    credential = derive_credential(mechanism, password, SALT, 4096)
    client, server, final = exchange(mechanism, user, password, credential)
    assert client.respond(server.respond(final)) is None
    assert server.authorization_id == user
    assert username_of(sasl_name(user)) == user


def test_a_wrong_password_fails_at_the_server_and_ends_the_exchange() -> None:
    credential = derive_credential(SCRAM_SHA_512, "right", SALT, 4096)
    _, server, final = exchange(SCRAM_SHA_512, "alice", "wrong", credential)
    with pytest.raises(SaslAuthenticationFailedError, match="Invalid client credentials"):
        server.respond(final)
    assert not server.complete
    with pytest.raises(IllegalSaslStateError, match="after the exchange ended"):
        server.respond(final)


def test_an_unknown_user_fails_at_the_first_message() -> None:
    server = ScramServer(SCRAM_SHA_256, {}.get, "s")
    with pytest.raises(SaslAuthenticationFailedError, match="Invalid user credentials"):
        server.respond(b"n,,n=nobody,r=abc")


def test_a_server_that_does_not_hold_the_credential_fails_at_the_client() -> None:
    credential = derive_credential(SCRAM_SHA_256, "pw", SALT, 4096)
    impostor = ScramCredential(SALT, credential.stored_key, bytes(32), 4096)
    client, server, final = exchange(SCRAM_SHA_256, "alice", "pw", impostor)
    answer = server.respond(final)
    with pytest.raises(SaslAuthenticationFailedError, match="Invalid server signature"):
        client.respond(answer)
    with pytest.raises(IllegalSaslStateError):
        client.respond(answer)


@pytest.mark.parametrize(
    ("tamper", "expected"),
    [
        (lambda m: m.replace(b"r=clientnonce", b"r=otherclient"), "Invalid client nonce"),
        (lambda m: m.replace(b"c=biws", b"c=eSws"), "Invalid channel binding"),
        (lambda m: m[: m.index(b",p=")] + b",p=AAAA", "Invalid client credentials"),
        (lambda m: m.replace(b",p=", b",q="), "invalid SCRAM client final message format"),
        (lambda m: b"\xff" + m, "not UTF-8"),
    ],
)
def test_tampered_final_messages_fail(tamper, expected: str) -> None:  # type: ignore[no-untyped-def]
    credential = derive_credential(SCRAM_SHA_256, "pw", SALT, 4096)
    _, server, final = exchange(SCRAM_SHA_256, "alice", "pw", credential)
    with pytest.raises(SaslAuthenticationFailedError, match=expected):
        server.respond(tamper(final))


@pytest.mark.parametrize(
    ("first", "expected"),
    [
        (b"y,,n=alice,r=abc", "invalid SCRAM client first message format"),
        (b"p=tls-unique,,n=alice,r=abc", "invalid SCRAM client first message format"),
        (b"n,,n=al,ice,r=abc", "invalid SCRAM client first message format"),
        (b"n,a=bob,n=alice,r=abc", "authorization id that is different"),
        (b"n,,n=alice,r=abc,tokenauth=true", "delegation tokens are not supported"),
    ],
)
def test_malformed_or_refused_first_messages_fail(first: bytes, expected: str) -> None:
    credential = derive_credential(SCRAM_SHA_256, "pw", SALT, 4096)
    server = ScramServer(SCRAM_SHA_256, {"alice": credential}.get, "s")
    with pytest.raises(SaslAuthenticationFailedError, match=expected):
        server.respond(first)


def test_an_authorization_id_equal_to_the_user_is_accepted_and_bound() -> None:
    credential = derive_credential(SCRAM_SHA_256, "pw", SALT, 4096)
    server = ScramServer(SCRAM_SHA_256, {"a,b": credential}.get, "s")
    first = parse_client_first(b"n,a=a=2Cb,n=a=2Cb,r=abc")
    assert (first.username, first.authorization_id, first.gs2_header) == (
        "a,b",
        "a,b",
        "n,a=a=2Cb,",
    )
    assert server.respond(first.to_bytes()).startswith(b"r=abcs,s=")


@pytest.mark.parametrize(
    ("server_first", "expected"),
    [
        (b"r=someoneelse,s=QUJD,i=4096", "does not start with client nonce"),
        (b"r=clientnonceX,s=QUJD,i=4095", "Requested iterations 4095 is less than the minimum"),
        (b"r=clientnonceX,s=QUJD,i=0", "invalid SCRAM iterations 0"),
        (b"r=clientnonceX,s=QUJ,i=4096", "invalid SCRAM server first message format"),
    ],
)
def test_the_client_refuses_a_bad_server_first(server_first: bytes, expected: str) -> None:
    client = ScramClient(SCRAM_SHA_256, "alice", "pw", "clientnonce")
    client.respond(b"")
    with pytest.raises(SaslAuthenticationFailedError, match=expected):
        client.respond(server_first)


def test_the_client_reports_the_servers_error() -> None:
    credential = derive_credential(SCRAM_SHA_256, "pw", SALT, 4096)
    client, _, _ = exchange(SCRAM_SHA_256, "alice", "pw", credential)
    with pytest.raises(SaslAuthenticationFailedError, match="failed with error: invalid-proof"):
        client.respond(b"e=invalid-proof")


def test_a_challenge_before_the_first_message_fails() -> None:
    with pytest.raises(SaslAuthenticationFailedError, match="before the client's first"):
        ScramClient(SCRAM_SHA_256, "alice", "pw", "n").respond(b"r=x")


def test_a_credential_below_the_minimum_iterations_is_refused_by_the_server() -> None:
    weak = ScramCredential(SALT, bytes(32), bytes(32), 1000)
    server = ScramServer(SCRAM_SHA_256, {"alice": weak}.get, "s")
    with pytest.raises(SaslAuthenticationFailedError, match="Iterations 1000 is less than"):
        server.respond(b"n,,n=alice,r=abc")


@pytest.mark.parametrize(
    ("salt", "iterations", "expected"),
    [
        (SALT, 4095, "iterations 4095 not in 4096..16384"),
        (SALT, 16385, "16385"),
        (b"", 4096, "salt is empty"),
    ],
)
def test_credentials_outside_the_bounds_are_unacceptable(
    salt: bytes, iterations: int, expected: str
) -> None:
    with pytest.raises(UnacceptableCredentialError, match=expected):
        derive_credential(SCRAM_SHA_256, "pw", salt, iterations)


def test_a_credential_from_a_salted_password_equals_the_derived_one_and_hides_its_keys() -> None:
    salted = salted_password(SCRAM_SHA_512, "pw", SALT, 4096)
    credential = credential_from_salted_password(SCRAM_SHA_512, salted, SALT, 4096)
    assert credential == derive_credential(SCRAM_SHA_512, "pw", SALT, 4096)
    assert credential.stored_key.hex() not in repr(credential)
    with pytest.raises(UnacceptableCredentialError, match="salted password is 64 bytes, got 32"):
        credential_from_salted_password(SCRAM_SHA_512, salted[:32], SALT, 4096)
