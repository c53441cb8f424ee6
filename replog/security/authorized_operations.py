"""The operations each resource type supports (Kafka's `AclEntry.supportedOperations`) and the
authorized-operations bit field Kafka's answers carry (`KafkaApis.authorizedOperations`).

Rules:
- The field is the OR of `1 << code` over the supported operations the caller is allowed
  (Kafka's `Utils.to32BitField` of AclOperation codes), each asked of the authorizer as a
  literal resource and never logged; with authorization off every supported operation is in.
- ALL is no supported operation: a caller allowed ALL has each supported one set instead.
- Pure: the caller's `may` answers the questions.
"""

from __future__ import annotations

from collections.abc import Callable

from replog.common.acl_codes import AclOperation, ResourceType

_OP = AclOperation
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        _OP.READ, _OP.WRITE, _OP.CREATE, _OP.DESCRIBE, _OP.DELETE, _OP.ALTER,
        _OP.DESCRIBE_CONFIGS, _OP.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (
        _OP.READ, _OP.DESCRIBE, _OP.DELETE, _OP.DESCRIBE_CONFIGS, _OP.ALTER_CONFIGS,
    ),
    ResourceType.CLUSTER: (
        _OP.CREATE, _OP.CLUSTER_ACTION, _OP.DESCRIBE_CONFIGS, _OP.ALTER_CONFIGS,
        _OP.IDEMPOTENT_WRITE, _OP.ALTER, _OP.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (_OP.DESCRIBE, _OP.WRITE),
}  # fmt: skip


def bit_field(operations: tuple[AclOperation, ...] | list[AclOperation]) -> int:
    """Kafka's 32-bit field of the operations' codes."""
    field = 0
    for operation in operations:
        field |= 1 << int(operation)
    return field


def authorized_operations(
    resource_type: ResourceType, may: Callable[[AclOperation], bool] | None
) -> int:
    """The bit field of the operations on a resource of `resource_type` the caller may do
    (`may`; None: authorization off, all of them)."""
    supported = SUPPORTED_OPERATIONS[resource_type]
    if may is None:
        return bit_field(supported)
    return bit_field([operation for operation in supported if may(operation)])
