"""A scripted Kafka listener for the group coordinator client's tests: a real `KafkaListener`
on 127.0.0.1 (port 0) whose group APIs answer what the test scripts.

`ScriptedKafka(answers, versions)`: `answers[api_key](request, version)` gives the response
(or raises `Drop` to close the connection without one, or awaits to hold it); `versions`
caps the served range of an API (an older broker). ApiVersions is answered from the served
table; every request is recorded in `seen` as (api key, version, request).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from replog.errors import RequestRefusedError
from replog.kafka.connection import KafkaRequest
from replog.kafka.messages.api_versions_request import ApiVersionsRequest
from replog.kafka.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from replog.kafka.protocol.codec import Message
from replog.server.kafka.kafka_group_apis import GROUP_SERVED
from replog.server.kafka.kafka_listener import KafkaListener

API_VERSIONS = 18

Script = Callable[[Any, int], Message | Awaitable[Message]]


class Drop(Exception):
    """Raised by a script: the listener closes the connection without an answer."""


class ScriptedKafka:
    def __init__(
        self,
        answers: Mapping[int, Script],
        versions: Mapping[int, tuple[int, int]] | None = None,
    ) -> None:
        self.answers = dict(answers)
        self.served = {API_VERSIONS: (0, 4), **GROUP_SERVED, **(versions or {})}
        self.seen: list[tuple[int, int, Any]] = []
        self.listener = KafkaListener("PLAINTEXT", "127.0.0.1", 0)

    @property
    def address(self) -> str:
        return self.listener.address

    async def __aenter__(self) -> ScriptedKafka:
        await self.listener.start(self)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.listener.stop()

    def handle(self, request: KafkaRequest, listener_name: str) -> Any:
        body = request.body
        if isinstance(body, ApiVersionsRequest):
            return ApiVersionsResponse(
                api_keys=[
                    ApiVersion(api_key=key, min_version=low, max_version=high)
                    for key, (low, high) in sorted(self.served.items())
                ]
            )
        self.seen.append((request.api_key, request.api_version, body))
        script = self.answers.get(request.api_key)
        if script is None:
            raise AssertionError(f"no scripted answer for API key {request.api_key}")
        try:
            return script(body, request.api_version)
        except Drop:
            # A refused request closes the connection, answering nothing from it on.
            raise RequestRefusedError("the script drops the connection") from None
