"""The Kafka listener's SASL and SCRAM credential handlers (docs/security.md).

Rules:
- SaslHandshake (v0-1) and SaslAuthenticate (v0-2) reach these handlers only where no SASL
  exchange takes them (a SASL listener's authenticator answers them itself,
  `replog.kafka.sasl_authenticator`): on a listener without SASL, answered ILLEGAL_SASL_STATE
  as Kafka's KafkaApis answers them. Being served here is what advertises them in ApiVersions.
- DescribeUserScramCredentials (v0) is answered from this broker's metadata image, as Kafka's
  brokers answer it from theirs (`replog.security.scram_describe`).
- AlterUserScramCredentials (v0) is forwarded to the active controller (as CreateTopics is,
  `KafkaAdminApis.forward`), which decides it (`replog.security.scram_control`); the salted
  passwords travel, never a password. A failure of the whole forward (no controller in time)
  is every user's error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from replog.errors import IllegalSaslStateError, InvalidRequestError, KafkaError
from replog.kafka.connection import KafkaRequest, Served
from replog.kafka.messages import alter_user_scram_credentials_response as ausr
from replog.kafka.messages import describe_user_scram_credentials_response as dusr
from replog.kafka.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
)
from replog.kafka.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from replog.kafka.messages.sasl_authenticate_request import SaslAuthenticateRequest
from replog.kafka.messages.sasl_authenticate_response import SaslAuthenticateResponse
from replog.kafka.messages.sasl_handshake_request import SaslHandshakeRequest
from replog.kafka.messages.sasl_handshake_response import SaslHandshakeResponse
from replog.kafka.protocol.codec import Message
from replog.pb import controller_pb2 as cpb
from replog.quorum.metadata.image import MetadataImage
from replog.security.scram_describe import describe_credentials
from replog.wire.broker_codec import error_from_proto

# The SASL exchange's own APIs, served (and so advertised) on every Kafka listener, a
# controller's too, as Kafka's ApiKeys lists them for both kinds of listener.
SASL_EXCHANGE_SERVED: Served = {
    SaslHandshakeRequest.API_KEY: (0, 1),
    SaslAuthenticateRequest.API_KEY: (0, 2),
}
SASL_SERVED: Served = {
    **SASL_EXCHANGE_SERVED,
    DescribeUserScramCredentialsRequest.API_KEY: (0, 0),
    AlterUserScramCredentialsRequest.API_KEY: (0, 0),
}
Forward = Callable[[str, Any], Awaitable[tuple[Any, KafkaError | None]]]


class KafkaSaslApis:
    """The SASL and SCRAM credential handlers of one broker's Kafka listeners."""

    def __init__(self, image: Callable[[], MetadataImage], forward: Forward) -> None:
        self._image = image
        self._forward = forward

    @property
    def served(self) -> Served:
        return SASL_SERVED

    def handle(self, request: KafkaRequest, listener_name: str) -> Message | Awaitable[Message]:
        body = request.body
        outside = outside_an_exchange(body, listener_name)
        if outside is not None:
            return outside
        if isinstance(body, DescribeUserScramCredentialsRequest):
            return self.describe(body)
        if isinstance(body, AlterUserScramCredentialsRequest):
            return self.alter(body)
        raise InvalidRequestError(f"no SASL handler for {type(body).__name__}")

    def describe(
        self, request: DescribeUserScramCredentialsRequest
    ) -> dusr.DescribeUserScramCredentialsResponse:
        credentials = self._image().scram.credentials
        asked = None if request.users is None else [u.name for u in request.users]
        answers = describe_credentials(
            {key: record.iterations for key, record in credentials.items()}, asked
        )
        return dusr.DescribeUserScramCredentialsResponse(
            results=[
                dusr.DescribeUserScramCredentialsResult(
                    user=a.user,
                    error_code=0 if a.error is None else a.error.code,
                    error_message=None if a.error is None else str(a.error),
                    credential_infos=[
                        dusr.CredentialInfo(mechanism=code, iterations=count)
                        for code, count in a.credentials
                    ],
                )
                for a in answers
            ]
        )

    async def alter(
        self, request: AlterUserScramCredentialsRequest
    ) -> ausr.AlterUserScramCredentialsResponse:
        answer, failure = await self._forward(
            "AlterUserScramCredentials",
            cpb.AlterUserScramCredentialsRequest(
                deletions=[
                    cpb.ScramCredentialDeletion(name=d.name, mechanism=d.mechanism)
                    for d in request.deletions
                ],
                upsertions=[
                    cpb.ScramCredentialUpsertion(
                        name=u.name,
                        mechanism=u.mechanism,
                        iterations=u.iterations,
                        salt=u.salt,
                        salted_password=u.salted_password,
                    )
                    for u in request.upsertions
                ],
            ),
        )
        if failure is not None or answer is None:
            users = dict.fromkeys(
                [d.name for d in request.deletions] + [u.name for u in request.upsertions]
            )
            return ausr.AlterUserScramCredentialsResponse(
                results=[_alter_result(user, failure) for user in users]
            )
        return ausr.AlterUserScramCredentialsResponse(
            results=[_alter_result(r.user, error_from_proto(r)) for r in answer.results]
        )


def _alter_result(user: str, error: KafkaError | None) -> ausr.AlterUserScramCredentialsResult:
    return ausr.AlterUserScramCredentialsResult(
        user=user,
        error_code=0 if error is None else error.code,
        error_message=None if error is None else str(error),
    )


def outside_an_exchange(body: Message, listener_name: str) -> Message | None:
    """The answer to a SaslHandshake or SaslAuthenticate no SASL exchange took (module rules):
    ILLEGAL_SASL_STATE; None for any other request."""
    if isinstance(body, SaslHandshakeRequest):
        return SaslHandshakeResponse(error_code=IllegalSaslStateError.code, mechanisms=[])
    if isinstance(body, SaslAuthenticateRequest):
        return SaslAuthenticateResponse(
            error_code=IllegalSaslStateError.code,
            error_message=f"SaslAuthenticate request received on listener {listener_name}, "
            "which does not authenticate with SASL, or after successful authentication",
        )
    return None
