"""Authorization by resource type (Kafka's `authorizeByResourceType`), one scenario per rule of
replog/security/resource_type_authorization.py; Kafka's own answers are in
test_security_kafka_gold.py."""

from __future__ import annotations

import pytest
from acl_helpers import DENY, GROUP, PREFIXED, TOPIC, Op, acl

from replog.common.acl_codes import ResourceType
from replog.errors import AuthorizerNotReadyError, InvalidAclError
from replog.quorum.metadata.records import AccessControlEntryRecord
from replog.security.acl_index import AclIndex
from replog.security.authorizer import Authorizer
from replog.security.principal import KafkaPrincipal
from replog.security.resource_type_authorization import authorize_by_resource_type

ALICE = KafkaPrincipal("User", "alice")
HOST = "127.0.0.1"


def may(
    *acls: AccessControlEntryRecord,
    op: Op = Op.WRITE,
    resource_type: ResourceType = TOPIC,
    allow_everyone: bool = False,
) -> bool:
    authorizer = Authorizer(
        AclIndex(acls), allow_everyone_if_no_acl_found=allow_everyone, loaded=True
    )
    return authorize_by_resource_type(authorizer, ALICE, HOST, op, resource_type)


def test_one_allowed_topic_is_enough_and_none_is_not() -> None:
    assert may(acl(TOPIC, "orders", Op.WRITE))
    assert not may()
    assert not may(acl(GROUP, "orders", Op.WRITE))  # another type
    assert not may(acl(TOPIC, "orders", Op.WRITE, principal="User:bob"))
    assert not may(acl(TOPIC, "orders", Op.WRITE, host="10.0.0.7"))


def test_operations_must_match_or_be_all_no_implications() -> None:
    assert may(acl(TOPIC, "orders", Op.ALL))
    assert not may(acl(TOPIC, "orders", Op.READ), op=Op.DESCRIBE)


def test_a_deny_that_covers_the_allowed_pattern_cancels_it() -> None:
    assert not may(acl(TOPIC, "orders", Op.WRITE), acl(TOPIC, "orders", Op.WRITE, DENY))
    assert not may(
        acl(TOPIC, "orders-eu", Op.WRITE, pattern=PREFIXED),
        acl(TOPIC, "ord", Op.WRITE, DENY, pattern=PREFIXED),
    )
    # A literal deny does not cover a prefixed allow, nor a longer prefix a shorter one.
    assert may(
        acl(TOPIC, "orders", Op.WRITE, pattern=PREFIXED), acl(TOPIC, "orders", Op.WRITE, DENY)
    )
    assert may(
        acl(TOPIC, "ord", Op.WRITE, pattern=PREFIXED),
        acl(TOPIC, "orders", Op.WRITE, DENY, pattern=PREFIXED),
    )


def test_the_wildcard_deny_wins_and_the_wildcard_allow_allows() -> None:
    assert not may(acl(TOPIC, "orders", Op.WRITE), acl(TOPIC, "*", Op.WRITE, DENY))
    assert may(acl(TOPIC, "*", Op.WRITE), acl(TOPIC, "orders", Op.WRITE, DENY))


def test_the_first_ordinary_decision_lets_super_users_and_open_clusters_in() -> None:
    assert may(allow_everyone=True)
    admin = Authorizer(super_users=frozenset({"User:admin"}))  # not even loaded
    assert authorize_by_resource_type(admin, KafkaPrincipal("User", "admin"), HOST, Op.WRITE, TOPIC)
    with pytest.raises(AuthorizerNotReadyError):
        authorize_by_resource_type(admin, ALICE, HOST, Op.WRITE, TOPIC)


@pytest.mark.parametrize(
    ("op", "resource_type"), [(Op.ANY, TOPIC), (Op.UNKNOWN, TOPIC), (Op.WRITE, ResourceType.ANY)]
)
def test_filter_values_are_refused(op: Op, resource_type: ResourceType) -> None:
    with pytest.raises(InvalidAclError, match="needs a concrete operation and resource type"):
        may(op=op, resource_type=resource_type)
