"""A SASL connection's authentication (`replog.kafka.sasl_authenticator`), one scenario per rule
of Kafka's SaslServerAuthenticator and KIP-368's re-authentication: what each request is
answered, when the connection closes, the principal it ends with."""

from __future__ import annotations

from replog.common.scram_mechanism import SCRAM_SHA_256, SCRAM_SHA_512, ScramMechanism
from replog.errors import (
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from replog.kafka.messages.api_versions_request import ApiVersionsRequest
from replog.kafka.messages.metadata_request import MetadataRequest
from replog.kafka.messages.sasl_authenticate_request import SaslAuthenticateRequest
from replog.kafka.messages.sasl_authenticate_response import SaslAuthenticateResponse
from replog.kafka.messages.sasl_handshake_request import SaslHandshakeRequest
from replog.kafka.messages.sasl_handshake_response import SaslHandshakeResponse
from replog.kafka.protocol.codec import Message
from replog.kafka.sasl_authenticator import SaslAuthenticator, SaslState, SaslStep
from replog.security.principal import KafkaPrincipal
from replog.security.scram_client import ScramClient
from replog.security.scram_credential import (
    CLIENT_KEY,
    ScramCredential,
    derive_credential,
    digest,
    keyed_hash,
    salted_password,
    xor,
)
from replog.security.scram_messages import auth_message, b64

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
USERS = {"alice": "alice-secret", "bob": "bob-secret"}
SALT = b"pepper and salt"


def credentials(mechanism: ScramMechanism):  # type: ignore[no-untyped-def]
    stored = {
        name: derive_credential(mechanism, password, SALT, 4096) for name, password in USERS.items()
    }

    def lookup(name: str) -> ScramCredential | None:
        return stored.get(name)

    return lookup


def authenticator(
    reauth_ms: int = 0, mechanisms: tuple[str, ...] = MECHANISMS
) -> SaslAuthenticator:
    nonces = iter(f"server-nonce-{i}" for i in range(100))
    return SaslAuthenticator(
        mechanisms,
        plain_users=USERS,
        credentials=credentials,
        new_nonce=lambda: next(nonces),
        reauth_ms={m: reauth_ms for m in mechanisms},
    )


def step(
    sasl: SaslAuthenticator, body: Message, now_ms: int = 0, version: int = 1
) -> SaslStep | None:
    return sasl.step(body.API_KEY, version, body, now_ms)


def plain(user: str, password: str, authzid: str = "") -> SaslAuthenticateRequest:
    return SaslAuthenticateRequest(auth_bytes=f"{authzid}\0{user}\0{password}".encode())


def answered(result: SaslStep | None) -> Message:
    assert result is not None and result.response is not None
    return result.response


def sign_in_plain(sasl: SaslAuthenticator, now_ms: int = 0) -> SaslAuthenticateResponse:
    assert answered(step(sasl, SaslHandshakeRequest(mechanism="PLAIN"))).error_code == 0
    result = step(sasl, plain("alice", "alice-secret"), now_ms)
    response = answered(result)
    assert isinstance(response, SaslAuthenticateResponse)
    return response


def test_plain_authenticates_after_api_versions_and_requests_then_pass_with_the_principal() -> None:
    sasl = authenticator()
    assert step(sasl, ApiVersionsRequest()) is None  # the handlers answer it
    handshake = answered(step(sasl, SaslHandshakeRequest(mechanism="PLAIN")))
    assert isinstance(handshake, SaslHandshakeResponse)
    assert handshake.error_code == 0 and handshake.mechanisms == list(MECHANISMS)
    response = answered(step(sasl, plain("alice", "alice-secret")))
    assert response.error_code == 0 and response.session_lifetime_ms == 0
    assert sasl.complete and sasl.principal == KafkaPrincipal("User", "alice")
    assert step(sasl, MetadataRequest()) is None
    assert sasl.session_expires_ms is None


def test_scram_sha_256_and_512_authenticate_against_the_stored_credentials() -> None:
    for mechanism in (SCRAM_SHA_256, SCRAM_SHA_512):
        sasl = authenticator()
        step(sasl, SaslHandshakeRequest(mechanism=mechanism.mechanism_name))
        client = ScramClient(mechanism, "bob", "bob-secret", "client-nonce")
        token = client.respond(b"")
        while token is not None:
            response = answered(step(sasl, SaslAuthenticateRequest(auth_bytes=token)))
            assert response.error_code == 0
            token = client.respond(response.auth_bytes)
        assert client.complete and sasl.complete
        assert str(sasl.principal) == "User:bob"


def test_a_wrong_password_or_unknown_user_is_sasl_authentication_failed_then_close() -> None:
    for user, password in (("alice", "wrong"), ("mallory", "alice-secret")):
        sasl = authenticator()
        step(sasl, SaslHandshakeRequest(mechanism="PLAIN"))
        result = step(sasl, plain(user, password))
        assert result is not None and result.close and result.failed_attempt
        response = answered(result)
        assert response.error_code == SaslAuthenticationFailedError.code
        assert response.error_message == "Authentication failed: Invalid username or password"
        assert result.failure is not None and password not in result.failure
        assert sasl.state is SaslState.FAILED and sasl.principal is None


def test_a_wrong_scram_proof_fails_naming_no_secret() -> None:
    sasl = authenticator()
    step(sasl, SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
    client = ScramClient(SCRAM_SHA_512, "alice", "not-her-password", "cn")
    first = answered(step(sasl, SaslAuthenticateRequest(auth_bytes=client.respond(b"") or b"")))
    final = client.respond(first.auth_bytes)
    result = step(sasl, SaslAuthenticateRequest(auth_bytes=final or b""))
    assert result is not None and result.close
    response = answered(result)
    assert response.error_code == SaslAuthenticationFailedError.code
    assert response.error_message == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-512"
    )
    assert "Invalid client credentials" in (result.failure or "")  # the cause, for the log
    assert "not-her-password" not in (result.failure or "")


def test_an_unknown_mechanism_is_unsupported_with_the_enabled_ones_then_close() -> None:
    sasl = authenticator(mechanisms=("SCRAM-SHA-512",))
    result = step(sasl, SaslHandshakeRequest(mechanism="PLAIN"))
    assert result is not None and result.close and result.failed_attempt
    handshake = answered(result)
    assert isinstance(handshake, SaslHandshakeResponse)
    assert handshake.error_code == UnsupportedSaslMechanismError.code
    assert handshake.mechanisms == ["SCRAM-SHA-512"]


def test_requests_out_of_order_close_the_connection() -> None:
    # Another API before the handshake: closed unanswered, as Kafka's broker does.
    sasl = authenticator()
    result = step(sasl, MetadataRequest())
    assert result is not None and result.close and result.response is None
    assert "Unexpected Kafka request of type Metadata during SASL handshake" in (
        result.failure or ""
    )
    # SaslAuthenticate before the handshake: ILLEGAL_SASL_STATE, then closed.
    sasl = authenticator()
    result = step(sasl, plain("alice", "alice-secret"))
    assert result is not None and result.close
    assert answered(result).error_code == IllegalSaslStateError.code
    # ApiVersions twice: closed.
    sasl = authenticator()
    step(sasl, ApiVersionsRequest())
    result = step(sasl, ApiVersionsRequest())
    assert result is not None and result.close
    # A second handshake while authenticating, or another API: closed.
    sasl = authenticator()
    step(sasl, SaslHandshakeRequest(mechanism="PLAIN"))
    result = step(sasl, SaslHandshakeRequest(mechanism="PLAIN"))
    assert result is not None and result.close
    assert answered(result).error_code == IllegalSaslStateError.code
    sasl = authenticator()
    step(sasl, SaslHandshakeRequest(mechanism="PLAIN"))
    result = step(sasl, MetadataRequest())
    assert result is not None and result.close and result.response is None


def test_sasl_authenticate_after_completion_is_illegal_state_and_the_connection_stays() -> None:
    sasl = authenticator()
    sign_in_plain(sasl)
    result = step(sasl, plain("alice", "alice-secret"))
    assert result is not None and not result.close
    assert answered(result).error_code == IllegalSaslStateError.code
    assert sasl.complete


def test_the_session_lifetime_is_given_and_a_request_past_it_closes_the_connection() -> None:
    sasl = authenticator(reauth_ms=1000)
    response = sign_in_plain(sasl, now_ms=5000)
    assert response.session_lifetime_ms == 1000 and sasl.session_expires_ms == 6000
    assert step(sasl, MetadataRequest(), now_ms=6000) is None  # at the end: still in
    result = step(sasl, MetadataRequest(), now_ms=6001)
    assert result is not None and result.close and result.response is None
    assert not result.failed_attempt  # an expired session is no failed authentication
    assert "session expired" in (result.failure or "")


def test_re_authentication_renews_the_session_with_the_same_principal() -> None:
    sasl = authenticator(reauth_ms=1000)
    sign_in_plain(sasl, now_ms=0)
    # Past the session a handshake is still let in: it begins the re-authentication.
    assert (
        answered(step(sasl, SaslHandshakeRequest(mechanism="PLAIN"), now_ms=1500)).error_code == 0
    )
    response = answered(step(sasl, plain("alice", "alice-secret"), now_ms=1600))
    assert response.error_code == 0 and response.session_lifetime_ms == 1000
    assert sasl.session_expires_ms == 2600 and str(sasl.principal) == "User:alice"
    assert step(sasl, MetadataRequest(), now_ms=2000) is None


def test_re_authentication_may_change_neither_the_principal_nor_the_mechanism() -> None:
    sasl = authenticator(reauth_ms=1000)
    sign_in_plain(sasl)
    step(sasl, SaslHandshakeRequest(mechanism="PLAIN"))
    result = step(sasl, plain("bob", "bob-secret"))
    assert result is not None and result.close
    assert answered(result).error_code == SaslAuthenticationFailedError.code
    assert "Cannot change principals during re-authentication" in (result.failure or "")
    sasl = authenticator(reauth_ms=1000)
    sign_in_plain(sasl)
    result = step(sasl, SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))
    assert result is not None and result.close
    assert "not supported for re-authentication" in (result.failure or "")


def test_a_v0_handshake_switches_to_unframed_tokens_until_complete() -> None:
    sasl = authenticator()
    assert answered(step(sasl, SaslHandshakeRequest(mechanism="PLAIN"), version=0)).error_code == 0
    assert sasl.raw_tokens
    response = answered(step(sasl, plain("alice", "alice-secret"), version=0))
    assert response.error_code == 0 and not sasl.raw_tokens and sasl.complete
    # A failure in that framing has no error answer: the connection just closes.
    sasl = authenticator()
    step(sasl, SaslHandshakeRequest(mechanism="PLAIN"), version=0)
    result = step(sasl, plain("alice", "nope"), version=0)
    assert result is not None and result.close and result.response is None


def test_plain_refuses_malformed_messages_and_another_authorization_id() -> None:
    for token, cause in (
        (b"alice\0alice-secret", "expected 3 tokens, got 2"),
        (b"\0\0alice-secret", "username not specified"),
        (b"\0alice\0", "password not specified"),
        (b"bob\0alice\0alice-secret", "authorization id that is different from username"),
    ):
        sasl = authenticator()
        step(sasl, SaslHandshakeRequest(mechanism="PLAIN"))
        result = step(sasl, SaslAuthenticateRequest(auth_bytes=token))
        assert result is not None and result.close
        assert cause in (answered(result).error_message or "")


def test_a_final_nonce_with_the_client_nonce_again_in_front_is_taken_as_kafka_takes_it() -> None:
    # librdkafka before 2.1 (Debian 12's kcat) sends its nonce again before the combined one;
    # Kafka's broker checks only that the final nonce ends with the combined one.
    sasl = authenticator()
    step(sasl, SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))
    first = b"n,,n=bob,r=cnonce"
    server_first = answered(step(sasl, SaslAuthenticateRequest(auth_bytes=first))).auth_bytes
    combined = server_first.split(b",")[0].removeprefix(b"r=")
    client = ScramClient(SCRAM_SHA_256, "bob", "bob-secret", "cnonce")
    client.respond(b"")
    final = client.respond(server_first)
    assert final is not None
    doubled = final.replace(b"r=" + combined, b"r=cnonce" + combined)
    # The proof covers the message as sent: recompute it over the doubled nonce.
    without_proof = doubled.rsplit(b",p=", 1)[0]
    salted = salted_password(SCRAM_SHA_256, "bob-secret", SALT, 4096)
    client_key = keyed_hash(SCRAM_SHA_256, salted, CLIENT_KEY)
    signed = auth_message("n=bob,r=cnonce", server_first.decode(), without_proof.decode())
    proof = xor(client_key, keyed_hash(SCRAM_SHA_256, digest(SCRAM_SHA_256, client_key), signed))
    result = step(
        sasl, SaslAuthenticateRequest(auth_bytes=without_proof + b",p=" + b64(proof).encode())
    )
    assert answered(result).error_code == 0 and sasl.complete
    # A final nonce that does not end with the combined one is still refused.
    sasl = authenticator()
    step(sasl, SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))
    step(sasl, SaslAuthenticateRequest(auth_bytes=first))
    result = step(
        sasl,
        SaslAuthenticateRequest(
            auth_bytes=without_proof.replace(combined, b"x" + combined[1:]) + b",p=AAAA"
        ),
    )
    assert result is not None and result.close and "Invalid client nonce" in (result.failure or "")
