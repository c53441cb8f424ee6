"""A Kafka listener's authorizer: Kafka's StandardAuthorizer (`replog.security.authorizer`) over
the ACLs of a metadata image, asked on behalf of each request's principal (`authorized`: the
per-API rules of `api_authorization` around a listener's handlers, and the authorized-operations
fields of `authorized_operations_fields`, with authorization off too).

Rules:
- The ACLs are the image's: a broker's current one, or for a controller's Kafka listener an
  image of the controller's committed ACLs. The index is built again whenever the image holds
  another ACL section (a broker's images share a section that did not change), so the request
  after an ACL's record is published is decided by it, on connections already open too.
- Loaded from the start: a broker serves Kafka clients only once its metadata has caught up.
- A refusal asked with `log` is one INFO line on `replog.server.kafka.authorizer`, in Kafka's
  words (principal, operation, host, resource, request, rule).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from uuid import UUID

from replog.common.acl_codes import AclOperation, PatternType, ResourceType
from replog.kafka.api_authorization import Caller, Gated, gate
from replog.kafka.authorized_operations_fields import operations_fill
from replog.kafka.connection import Answer, KafkaRequest, api_name
from replog.kafka.protocol.codec import Message
from replog.quorum.controller.controller import QuorumController
from replog.quorum.metadata.image import AclsImage, MetadataImage, frozen_mapping
from replog.security.acl_index import AclIndex
from replog.security.authorizer import Action, Authorizer
from replog.security.resource_type_authorization import authorize_by_resource_type
from replog.server.config.authorizer_config import AuthorizerConfig

log = logging.getLogger("replog.server.kafka.authorizer")


class BrokerAuthorizer:
    __slots__ = ("_acls_of", "_authorizer", "_config", "_image")

    def __init__(self, config: AuthorizerConfig, image: Callable[[], MetadataImage]) -> None:
        self._config = config
        self._image = image
        self._acls_of: AclsImage | None = None
        self._authorizer = Authorizer(loaded=True)

    def authorizer(self) -> Authorizer:
        acls = self._image().acls
        if acls is not self._acls_of:
            self._authorizer = Authorizer(
                AclIndex(acls.acls.values()),
                super_users=self._config.super_users,
                allow_everyone_if_no_acl_found=self._config.allow_everyone_if_no_acl_found,
                loaded=True,
            )
            self._acls_of = acls
        return self._authorizer

    def caller(self, request: KafkaRequest) -> RequestCaller:
        return RequestCaller(self.authorizer(), request, self._image)


class RequestCaller:
    """`api_authorization.Caller` for one request."""

    __slots__ = ("_authorizer", "_image", "_request")

    def __init__(
        self, authorizer: Authorizer, request: KafkaRequest, image: Callable[[], MetadataImage]
    ) -> None:
        self._authorizer = authorizer
        self._request = request
        self._image = image

    def may(
        self, operation: AclOperation, resource_type: ResourceType, name: str, *, log: bool = True
    ) -> bool:
        request = self._request
        decision = self._authorizer.authorize(
            request.principal, request.client_host, Action(operation, resource_type, name)
        )
        if not decision.allowed and log:
            _log_denied(request, operation, resource_type, name, decision.rule)
        return decision.allowed

    def may_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        request = self._request
        return authorize_by_resource_type(
            self._authorizer, request.principal, request.client_host, operation, resource_type
        )

    def topic_name(self, topic_id: UUID) -> str | None:
        topic = self._image().topics.by_id.get(topic_id)
        return None if topic is None else topic.name


def committed_acls(controller: QuorumController) -> Callable[[], MetadataImage]:
    """An image holding only the ACLs of `controller`'s committed state, for its Kafka
    listener (made per request: the few tools that ask there ask rarely)."""

    def image() -> MetadataImage:
        acls = controller.acls.acls(controller.last_stable_offset)
        return MetadataImage(acls=AclsImage(frozen_mapping({a.acl_id: a for a in acls})))

    return image


def authorized(
    authorizer: BrokerAuthorizer | None,
    request: KafkaRequest,
    handle: Callable[[KafkaRequest, Caller | None], Answer],
    rules: Callable[[int, int, Message, Caller], Gated | None] = gate,
) -> Answer:
    """`handle`'s answer to `request` under `authorizer` (None: authorization off): the entries
    the principal may not touch answered with Kafka's errors, the rest handled, and the
    authorized-operations fields the request asks for filled (`authorized_operations_fields`);
    `rules`: a broker's (`gate`) or a controller's (`controller_gate`)."""
    caller = None if authorizer is None else authorizer.caller(request)
    body = request.body
    gated = None if caller is None else rules(request.api_key, request.api_version, body, caller)
    fill = operations_fill(request.api_key, request.api_version, body, caller)
    if gated is None and fill is None:
        return handle(request, caller)

    def complete(answer: Message | None) -> Message | None:
        if gated is not None:
            answer = gated.complete(answer)
        return answer if answer is None or fill is None else fill(answer)

    if gated is not None:
        if gated.body is None:
            return complete(None)
        request = replace(request, body=gated.body)
    answer = handle(request, caller)
    if answer is None or isinstance(answer, Message):
        return complete(answer)
    return _completed_later(answer, complete)


async def _completed_later(
    answer: Awaitable[Message | None], complete: Callable[[Message | None], Message | None]
) -> Message | None:
    return complete(await answer)


def _log_denied(
    request: KafkaRequest,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    rule: str,
) -> None:
    log.info(
        "Principal = %s is Denied operation = %s from host = %s on resource = %s:%s:%s for "
        "request = %s with resourceRefCount = 1 based on rule %s",
        request.principal,
        operation.name,
        request.client_host,
        resource_type.name.title().replace("_", ""),
        PatternType.LITERAL.name,
        name,
        api_name(request.api_key),
        rule,
    )
