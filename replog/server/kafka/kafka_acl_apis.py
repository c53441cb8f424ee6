"""The Kafka listener's ACL handlers: DescribeAcls (29), CreateAcls (30), DeleteAcls (31).

Rules (Kafka's AclApis and ControllerApis):
- With authorization off (`authorizer.class.name` empty) each is SECURITY_DISABLED: the
  whole DescribeAcls, every creation, every filter.
- DescribeAcls is answered from this broker's metadata image: the ACLs the filter matches
  (`AclBindingFilter.matches`), grouped by resource pattern in the order first met (ACLs in
  id order). A filter holding UNKNOWN is INVALID_REQUEST.
- CreateAcls and DeleteAcls are forwarded to the active controller (`ControllerService`
  CreateAcls/DeleteAcls, which decide with Kafka's AclControlManager rules), redirects and
  elections followed for 30 s as the admin requests are (`kafka_admin_apis`); an error of the
  whole forwarded request (no controller answering) is every entry's error. Each creation's or
  filter's answer is the controller's, in request order; a filter's matching ACLs are those it
  removed.
- Who may call them is `api_authorization`'s rule (CLUSTER ALTER, CLUSTER DESCRIBE), asked
  before these handlers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from replog.common.acl_codes import AclOperation, AclPermissionType, PatternType, ResourceType
from replog.errors import InvalidAclError, InvalidRequestError, KafkaError, SecurityDisabledError
from replog.kafka.connection import KafkaRequest
from replog.kafka.messages import create_acls_response as car
from replog.kafka.messages import delete_acls_response as dar
from replog.kafka.messages import describe_acls_response as dsr
from replog.kafka.messages.create_acls_request import CreateAclsRequest
from replog.kafka.messages.delete_acls_request import DeleteAclsRequest
from replog.kafka.messages.describe_acls_request import DescribeAclsRequest
from replog.pb import controller_pb2 as cpb
from replog.quorum.metadata.image import MetadataImage
from replog.security.acl_bindings import AclBinding, AclBindingFilter, check_filter
from replog.server.kafka.kafka_apis import error_code
from replog.wire import acl_codec
from replog.wire.broker_codec import error_from_proto

DESCRIBE_ACLS = 29
CREATE_ACLS = 30
DELETE_ACLS = 31
ACL_SERVED: Mapping[int, tuple[int, int]] = {
    DESCRIBE_ACLS: (1, 3),
    CREATE_ACLS: (1, 3),
    DELETE_ACLS: (1, 3),
}
NO_AUTHORIZER = "No Authorizer is configured."
# A request to the active controller's gRPC method: its answer and the whole request's error.
Forward = Callable[[str, Any], Awaitable[tuple[Any, KafkaError | None]]]


def binding_filter(
    resource_type: int,
    name: str | None,
    pattern_type: int,
    principal: str | None,
    host: str | None,
    operation: int,
    permission_type: int,
) -> AclBindingFilter:
    """A filter from a request's codes (a code Kafka does not define reads as UNKNOWN)."""
    return AclBindingFilter(
        acl_codec.code_of(ResourceType, resource_type),
        name,
        acl_codec.code_of(PatternType, pattern_type),
        principal,
        host,
        acl_codec.code_of(AclOperation, operation),
        acl_codec.code_of(AclPermissionType, permission_type),
    )


class KafkaAclApis:
    """The ACL handlers of one broker's Kafka listeners."""

    def __init__(
        self,
        broker_id: int,
        *,
        enabled: bool,
        image: Callable[[], MetadataImage],
        forward: Forward,
    ) -> None:
        """`forward`: `KafkaAdminApis.forward_request` (its retries and timeouts)."""
        self.broker_id = broker_id
        self._enabled = enabled
        self._image = image
        self._forward_call = forward

    @property
    def served(self) -> Mapping[int, tuple[int, int]]:
        return ACL_SERVED

    def handle(self, request: KafkaRequest, listener_name: str) -> Any:
        body = request.body
        if isinstance(body, DescribeAclsRequest):
            return self.describe_acls(body)
        if isinstance(body, CreateAclsRequest):
            return self.create_acls(body)
        if isinstance(body, DeleteAclsRequest):
            return self.delete_acls(body)
        raise InvalidRequestError(f"no ACL handler for {type(body).__name__}")

    def describe_acls(self, request: DescribeAclsRequest) -> dsr.DescribeAclsResponse:
        if not self._enabled:
            return dsr.DescribeAclsResponse(
                error_code=SecurityDisabledError.code, error_message=NO_AUTHORIZER
            )
        wanted = binding_filter(
            request.resource_type_filter,
            request.resource_name_filter,
            request.pattern_type_filter,
            request.principal_filter,
            request.host_filter,
            request.operation,
            request.permission_type,
        )
        try:
            check_filter(wanted)
        except InvalidAclError as error:
            return dsr.DescribeAclsResponse(error_code=error.code, error_message=str(error))
        acls = self._image().acls.acls
        resources: dict[tuple[int, str, int], dsr.DescribeAclsResource] = {}
        for acl_id in sorted(acls):
            binding = AclBinding.of(acls[acl_id])
            if not wanted.matches(binding):
                continue
            key = (binding.resource_type, binding.resource_name, binding.pattern_type)
            resource = resources.get(key)
            if resource is None:
                resource = resources[key] = dsr.DescribeAclsResource(
                    resource_type=key[0], resource_name=key[1], pattern_type=key[2], acls=[]
                )
            resource.acls.append(
                dsr.AclDescription(
                    principal=binding.principal,
                    host=binding.host,
                    operation=binding.operation,
                    permission_type=binding.permission_type,
                )
            )
        return dsr.DescribeAclsResponse(resources=list(resources.values()))

    async def create_acls(self, request: CreateAclsRequest) -> car.CreateAclsResponse:
        count = len(request.creations)
        if not self._enabled:
            return car.CreateAclsResponse(
                results=[_creation(SecurityDisabledError(NO_AUTHORIZER)) for _ in range(count)]
            )
        answer, failure = await self._forward(
            "CreateAcls",
            cpb.CreateAclsRequest(
                creations=[
                    cpb.AclBinding(
                        resource_type=c.resource_type,
                        resource_name=c.resource_name,
                        pattern_type=c.resource_pattern_type,
                        principal=c.principal,
                        host=c.host,
                        operation=c.operation,
                        permission_type=c.permission_type,
                    )
                    for c in request.creations
                ]
            ),
        )
        if failure is not None:
            return car.CreateAclsResponse(results=[_creation(failure) for _ in range(count)])
        return car.CreateAclsResponse(
            results=[_creation(error_from_proto(result)) for result in answer.results]
        )

    async def delete_acls(self, request: DeleteAclsRequest) -> dar.DeleteAclsResponse:
        count = len(request.filters)
        if not self._enabled:
            refused = SecurityDisabledError(NO_AUTHORIZER)
            return dar.DeleteAclsResponse(filter_results=[_filtered(refused) for _ in range(count)])
        answer, failure = await self._forward(
            "DeleteAcls",
            cpb.DeleteAclsRequest(
                filters=[
                    acl_codec.filter_to_proto(
                        binding_filter(
                            f.resource_type_filter,
                            f.resource_name_filter,
                            f.pattern_type_filter,
                            f.principal_filter,
                            f.host_filter,
                            f.operation,
                            f.permission_type,
                        )
                    )
                    for f in request.filters
                ]
            ),
        )
        if failure is not None:
            return dar.DeleteAclsResponse(filter_results=[_filtered(failure) for _ in range(count)])
        results = []
        for result in answer.results:
            error = error_from_proto(result)
            if error is not None:
                results.append(_filtered(error))
                continue
            results.append(
                dar.DeleteAclsFilterResult(
                    error_message=None,
                    matching_acls=[
                        dar.DeleteAclsMatchingAcl(
                            error_message=None,
                            resource_type=b.resource_type,
                            resource_name=b.resource_name,
                            pattern_type=b.pattern_type,
                            principal=b.principal,
                            host=b.host,
                            operation=b.operation,
                            permission_type=b.permission_type,
                        )
                        for b in result.matching
                    ],
                )
            )
        return dar.DeleteAclsResponse(filter_results=results)

    async def _forward(self, method: str, request: Any) -> tuple[Any, KafkaError | None]:
        answer, failure = await self._forward_call(method, request)
        return (None, failure) if failure is not None else (answer, None)


def _creation(error: KafkaError | None) -> car.AclCreationResult:
    return car.AclCreationResult(
        error_code=error_code(error), error_message=None if error is None else str(error)
    )


def _filtered(error: KafkaError) -> dar.DeleteAclsFilterResult:
    return dar.DeleteAclsFilterResult(error_code=error_code(error), error_message=str(error))
