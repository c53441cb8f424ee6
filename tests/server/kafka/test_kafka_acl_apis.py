"""The broker's ACL handlers (`kafka_acl_apis.py`): DescribeAcls from the image, grouped by
resource pattern; CreateAcls and DeleteAcls forwarded and answered per creation and filter,
the whole request's failure every entry's error; SECURITY_DISABLED with no authorizer."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest

from replog.common.acl_codes import AclOperation, AclPermissionType, PatternType, ResourceType
from replog.errors import (
    InvalidRequestError,
    KafkaError,
    NotControllerError,
    SecurityDisabledError,
)
from replog.kafka.messages.create_acls_request import AclCreation, CreateAclsRequest
from replog.kafka.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from replog.kafka.messages.describe_acls_request import DescribeAclsRequest
from replog.pb import controller_pb2 as cpb
from replog.quorum.metadata.image import AclsImage, MetadataImage, frozen_mapping
from replog.quorum.metadata.records import AccessControlEntryRecord
from replog.server.kafka.kafka_acl_apis import KafkaAclApis
from replog.wire.controller_codec import error_status

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP


def acl(
    n: int, rtype: ResourceType, name: str, principal: str, op: AclOperation
) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        UUID(int=n), rtype, name, PatternType.LITERAL, principal, "*", op, AclPermissionType.ALLOW
    )


IMAGE = MetadataImage(
    acls=AclsImage(
        frozen_mapping(
            {
                UUID(int=n): a
                for n, a in enumerate(
                    [
                        acl(1, TOPIC, "paid", "User:alice", AclOperation.READ),
                        acl(2, GROUP, "billing", "User:alice", AclOperation.READ),
                        acl(3, TOPIC, "paid", "User:bob", AclOperation.WRITE),
                    ],
                    start=1,
                )
            }
        )
    )
)


class Forward:
    def __init__(self, answer: Any = None, failure: KafkaError | None = None) -> None:
        self.answer, self.failure = answer, failure
        self.sent: list[tuple[str, Any]] = []

    async def __call__(self, method: str, request: Any) -> tuple[Any, KafkaError | None]:
        self.sent.append((method, request))
        return self.answer, self.failure


def apis(forward: Forward | None = None, enabled: bool = True) -> KafkaAclApis:
    return KafkaAclApis(1, enabled=enabled, image=lambda: IMAGE, forward=forward or Forward())


def test_describe_acls_groups_what_the_filter_matches_by_resource() -> None:
    answer = apis().describe_acls(
        DescribeAclsRequest(
            resource_type_filter=ResourceType.ANY,
            resource_name_filter=None,
            pattern_type_filter=PatternType.ANY,
            principal_filter=None,
            host_filter=None,
            operation=AclOperation.ANY,
            permission_type=AclPermissionType.ANY,
        )
    )
    assert answer.error_code == 0
    assert [(r.resource_name, [a.principal for a in r.acls]) for r in answer.resources] == [
        ("paid", ["User:alice", "User:bob"]),
        ("billing", ["User:alice"]),
    ]
    only_bob = apis().describe_acls(
        DescribeAclsRequest(
            resource_type_filter=TOPIC,
            resource_name_filter="paid",
            pattern_type_filter=PatternType.MATCH,
            principal_filter="User:bob",
            host_filter=None,
            operation=AclOperation.ANY,
            permission_type=AclPermissionType.ANY,
        )
    )
    assert [[a.operation for a in r.acls] for r in only_bob.resources] == [[AclOperation.WRITE]]


def test_a_filter_holding_unknown_is_invalid_request_and_no_authorizer_is_security_disabled() -> (
    None
):
    unknown = apis().describe_acls(
        DescribeAclsRequest(resource_type_filter=0, operation=1, permission_type=1)
    )
    assert unknown.error_code == 42 and "Unknown" in (unknown.error_message or "")
    disabled = apis(enabled=False).describe_acls(DescribeAclsRequest())
    assert disabled.error_code == SecurityDisabledError.code


@pytest.mark.asyncio
async def test_create_acls_forwards_every_creation_and_answers_each() -> None:
    forward = Forward(
        cpb.CreateAclsResponse(
            results=[
                cpb.AclCreationResult(),
                cpb.AclCreationResult(
                    error=error_status(InvalidRequestError("Resource name should not be empty"))
                ),
            ]
        )
    )
    creations = [
        AclCreation(
            resource_type=2,
            resource_name=n,
            resource_pattern_type=3,
            principal="User:a",
            host="*",
            operation=3,
            permission_type=3,
        )
        for n in ("paid", "")
    ]
    answer = await apis(forward).create_acls(CreateAclsRequest(creations=creations))
    assert [r.error_code for r in answer.results] == [0, InvalidRequestError.code]
    assert answer.results[1].error_message == "Resource name should not be empty"
    method, sent = forward.sent[0]
    assert method == "CreateAcls" and [b.resource_name for b in sent.creations] == ["paid", ""]


@pytest.mark.asyncio
async def test_a_failed_forward_is_every_entrys_error_and_disabled_answers_each() -> None:
    failed = Forward(failure=NotControllerError("no controller"))
    filters = [
        DeleteAclsFilter(
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=1,
            operation=1,
            permission_type=1,
        )
    ] * 2
    answer = await apis(failed).delete_acls(DeleteAclsRequest(filters=filters))
    assert [r.error_code for r in answer.filter_results] == [NotControllerError.code] * 2
    disabled = await apis(enabled=False).create_acls(CreateAclsRequest(creations=[AclCreation()]))
    assert [r.error_code for r in disabled.results] == [SecurityDisabledError.code]


@pytest.mark.asyncio
async def test_delete_acls_answers_each_filter_with_what_it_removed() -> None:
    removed = cpb.AclBinding(
        resource_type=2,
        resource_name="paid",
        pattern_type=3,
        principal="User:a",
        host="*",
        operation=3,
        permission_type=3,
    )
    forward = Forward(
        cpb.DeleteAclsResponse(
            results=[cpb.AclFilterResult(matching=[removed]), cpb.AclFilterResult()]
        )
    )
    filters = [
        DeleteAclsFilter(
            resource_type_filter=2,
            resource_name_filter="paid",
            pattern_type_filter=3,
            operation=1,
            permission_type=1,
        ),
        DeleteAclsFilter(
            resource_type_filter=3,
            resource_name_filter=None,
            pattern_type_filter=1,
            operation=1,
            permission_type=1,
        ),
    ]
    answer = await apis(forward).delete_acls(DeleteAclsRequest(filters=filters))
    assert [[m.resource_name for m in r.matching_acls] for r in answer.filter_results] == [
        ["paid"],
        [],
    ]
    assert not forward.sent[0][1].filters[1].HasField("resource_name")
