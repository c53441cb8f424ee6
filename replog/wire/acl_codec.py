"""Translation between the Controller service's ACL messages and the ACL types of
`replog.security.acl_bindings`.

Rules:
- Codes travel as Kafka's numbers (`replog.common.acl_codes`); a number no enum holds reads as
  UNKNOWN, as Kafka's enums read it, so that the binding or filter holding it is refused on
  its own (`acl_bindings.check_new_binding`, `check_filter`), not the whole request.
- A filter's absent name, principal or host (`optional`, unset) is None: any.
- Per-entry errors cross as `ErrorStatus`; no error is an unset field.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TypeVar

from replog.common.acl_codes import AclOperation, AclPermissionType, PatternType, ResourceType
from replog.errors import KafkaError
from replog.pb import controller_pb2 as pb
from replog.security.acl_bindings import AclBinding, AclBindingFilter
from replog.security.acl_control import CreateResult, DeleteResult
from replog.wire.controller_codec import error_status

E = TypeVar("E", bound=IntEnum)


def code_of(enum: type[E], value: int) -> E:
    try:
        return enum(value)
    except ValueError:
        return enum["UNKNOWN"]


def binding_to_proto(binding: AclBinding) -> pb.AclBinding:
    return pb.AclBinding(
        resource_type=binding.resource_type,
        resource_name=binding.resource_name,
        pattern_type=binding.pattern_type,
        principal=binding.principal,
        host=binding.host,
        operation=binding.operation,
        permission_type=binding.permission_type,
    )


def binding_from_proto(m: pb.AclBinding) -> AclBinding:
    return AclBinding(
        code_of(ResourceType, m.resource_type),
        m.resource_name,
        code_of(PatternType, m.pattern_type),
        m.principal,
        m.host,
        code_of(AclOperation, m.operation),
        code_of(AclPermissionType, m.permission_type),
    )


def filter_to_proto(f: AclBindingFilter) -> pb.AclBindingFilter:
    m = pb.AclBindingFilter(
        resource_type=f.resource_type,
        pattern_type=f.pattern_type,
        operation=f.operation,
        permission_type=f.permission_type,
    )
    if f.resource_name is not None:
        m.resource_name = f.resource_name
    if f.principal is not None:
        m.principal = f.principal
    if f.host is not None:
        m.host = f.host
    return m


def filter_from_proto(m: pb.AclBindingFilter) -> AclBindingFilter:
    return AclBindingFilter(
        code_of(ResourceType, m.resource_type),
        m.resource_name if m.HasField("resource_name") else None,
        code_of(PatternType, m.pattern_type),
        m.principal if m.HasField("principal") else None,
        m.host if m.HasField("host") else None,
        code_of(AclOperation, m.operation),
        code_of(AclPermissionType, m.permission_type),
    )


def create_results_to_proto(results: list[CreateResult]) -> pb.CreateAclsResponse:
    return pb.CreateAclsResponse(
        results=[pb.AclCreationResult(error=error_status(result)) for result in results]
    )


def delete_results_to_proto(results: list[DeleteResult]) -> pb.DeleteAclsResponse:
    answers = []
    for result in results:
        if isinstance(result, KafkaError):
            answers.append(pb.AclFilterResult(error=error_status(result)))
        else:
            answers.append(pb.AclFilterResult(matching=[binding_to_proto(b) for b in result]))
    return pb.DeleteAclsResponse(results=answers)
