"""The SASL and SCRAM credential handlers (`kafka_sasl_apis`): SaslHandshake and SaslAuthenticate
outside a SASL exchange, DescribeUserScramCredentials from the image, AlterUserScramCredentials
forwarded with the salted passwords and answered per user."""

from __future__ import annotations

import asyncio
from typing import Any

from replog.errors import (
    IllegalSaslStateError,
    RequestTimedOutError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
)
from replog.kafka.connection import KafkaRequest
from replog.kafka.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from replog.kafka.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
    UserName,
)
from replog.kafka.messages.request_header import RequestHeader
from replog.kafka.messages.sasl_authenticate_request import SaslAuthenticateRequest
from replog.kafka.messages.sasl_handshake_request import SaslHandshakeRequest
from replog.kafka.protocol.codec import Message
from replog.pb import common_pb2
from replog.pb import controller_pb2 as cpb
from replog.quorum.metadata.image import MetadataImage, ScramImage
from replog.quorum.metadata.records import UserScramCredentialRecord
from replog.server.kafka.kafka_sasl_apis import SASL_SERVED, KafkaSaslApis

IMAGE = MetadataImage(
    scram=ScramImage(
        {
            ("alice", 1): UserScramCredentialRecord("alice", 1, b"s", b"k" * 32, b"k" * 32, 8192),
            ("alice", 2): UserScramCredentialRecord("alice", 2, b"s", b"k" * 64, b"k" * 64, 4096),
        }
    )
)


def request(body: Message, version: int = 0) -> KafkaRequest:
    header = RequestHeader(
        request_api_key=body.API_KEY, request_api_version=version, correlation_id=1
    )
    return KafkaRequest(0, header, body, 0)


def test_sasl_requests_outside_an_exchange_are_illegal_state() -> None:
    apis = KafkaSaslApis(lambda: IMAGE, forward=None)  # type: ignore[arg-type]
    assert set(SASL_SERVED) == {17, 36, 50, 51}
    for body in (SaslHandshakeRequest(mechanism="PLAIN"), SaslAuthenticateRequest()):
        answer: Any = apis.handle(request(body, 1), "PLAINTEXT")
        assert answer.error_code == IllegalSaslStateError.code


def test_describe_answers_from_the_image() -> None:
    apis = KafkaSaslApis(lambda: IMAGE, forward=None)  # type: ignore[arg-type]
    answer: Any = apis.handle(
        request(
            DescribeUserScramCredentialsRequest(
                users=[UserName(name="alice"), UserName(name="bob")]
            )
        ),
        "PLAINTEXT",
    )
    alice, bob = answer.results
    assert [(c.mechanism, c.iterations) for c in alice.credential_infos] == [(1, 8192), (2, 4096)]
    assert alice.error_code == 0 and bob.error_code == ResourceNotFoundError.code


def test_alter_is_forwarded_and_answered_per_user() -> None:
    sent: list[Any] = []

    async def forward(method: str, message: Any) -> tuple[Any, Any]:
        sent.append((method, message))
        return (
            cpb.AlterUserScramCredentialsResponse(
                results=[
                    cpb.AlterUserScramCredentialsResult(user="alice"),
                    cpb.AlterUserScramCredentialsResult(
                        user="bob",
                        error=common_pb2.ErrorStatus(
                            code=UnacceptableCredentialError.code, message="Too few iterations"
                        ),
                    ),
                ]
            ),
            None,
        )

    body = AlterUserScramCredentialsRequest(
        deletions=[ScramCredentialDeletion(name="carol", mechanism=1)],
        upsertions=[
            ScramCredentialUpsertion(
                name="alice", mechanism=2, iterations=8192, salt=b"salt", salted_password=b"p" * 64
            )
        ],
    )
    apis = KafkaSaslApis(lambda: IMAGE, forward)
    answer: Any = asyncio.run(apis.handle(request(body), "PLAINTEXT"))  # type: ignore[arg-type]
    ((method, message),) = sent
    assert method == "AlterUserScramCredentials"
    assert (
        message.upsertions[0].salted_password == b"p" * 64 and message.deletions[0].name == "carol"
    )
    assert [(r.user, r.error_code, r.error_message) for r in answer.results] == [
        ("alice", 0, None),
        ("bob", UnacceptableCredentialError.code, "Too few iterations"),
    ]

    async def unanswered(method: str, message: Any) -> tuple[Any, Any]:
        return None, RequestTimedOutError("no controller answered")

    answer = asyncio.run(KafkaSaslApis(lambda: IMAGE, unanswered).handle(request(body), "P"))  # type: ignore[arg-type]
    assert [(r.user, r.error_code) for r in answer.results] == [
        ("carol", RequestTimedOutError.code),
        ("alice", RequestTimedOutError.code),
    ]
