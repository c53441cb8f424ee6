"""The authorizer in scenarios: each of StandardAuthorizer's rules (module docstring of
replog/security/authorizer.py) shown once, and the ACL index's replay and its refusals."""

from __future__ import annotations

from uuid import UUID

import pytest
from acl_helpers import (
    CLUSTER,
    DENY,
    GROUP,
    PREFIXED,
    TOPIC,
    TXN,
    Op,
    acl,
)

from replog.common.acl_codes import ResourceType
from replog.errors import (
    AuthorizerNotReadyError,
    ConfigError,
    InvalidAclError,
    MetadataReplayError,
)
from replog.quorum.metadata.records import (
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
)
from replog.security.acl_index import AclIndex
from replog.security.authorizer import Action, Authorizer
from replog.security.principal import (
    ANONYMOUS,
    KafkaPrincipal,
    parse_principal,
    parse_super_users,
)

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
HOST = "127.0.0.1"


def authorizer(
    *acls: AccessControlEntryRecord, allow_everyone: bool = False, super_users: str = ""
) -> Authorizer:
    return Authorizer(
        AclIndex(acls),
        super_users=parse_super_users(super_users),
        allow_everyone_if_no_acl_found=allow_everyone,
        loaded=True,
    )


def allowed(
    auth: Authorizer,
    op: Op,
    resource_type: ResourceType = TOPIC,
    name: str = "orders",
    who: KafkaPrincipal = ALICE,
    host: str = HOST,
) -> bool:
    return auth.authorize(who, host, Action(op, resource_type, name)).allowed


def test_a_literal_allow_grants_its_operation_on_that_name_only() -> None:
    auth = authorizer(acl(TOPIC, "orders", Op.READ))
    assert allowed(auth, Op.READ)
    assert not allowed(auth, Op.WRITE)
    assert not allowed(auth, Op.READ, name="orders-eu")
    assert not allowed(auth, Op.READ, resource_type=GROUP)
    assert not allowed(auth, Op.READ, who=BOB)


def test_deny_beats_allow_whatever_the_pattern() -> None:
    auth = authorizer(
        acl(TOPIC, "orders", Op.ALL),
        acl(TOPIC, "ord", Op.WRITE, DENY, pattern=PREFIXED),
    )
    assert allowed(auth, Op.READ)
    assert not allowed(auth, Op.WRITE)
    decision = auth.authorize(ALICE, HOST, Action(Op.WRITE, TOPIC, "orders"))
    assert decision.rule.startswith("MatchingAcl(") and "DENY" in decision.rule


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE])
def test_read_write_delete_and_alter_imply_describe(granted: Op) -> None:
    assert allowed(authorizer(acl(TOPIC, "orders", granted)), Op.DESCRIBE)


def test_alter_configs_implies_describe_configs_and_nothing_else_implies_more() -> None:
    auth = authorizer(acl(TOPIC, "orders", Op.ALTER_CONFIGS))
    assert allowed(auth, Op.DESCRIBE_CONFIGS)
    assert not allowed(auth, Op.DESCRIBE)
    assert not allowed(authorizer(acl(TOPIC, "orders", Op.CREATE)), Op.DESCRIBE)
    assert not allowed(authorizer(acl(TOPIC, "orders", Op.DESCRIBE)), Op.READ)


def test_implication_is_for_allow_only_a_deny_of_read_leaves_describe() -> None:
    auth = authorizer(acl(TOPIC, "orders", Op.ALL), acl(TOPIC, "orders", Op.READ, DENY))
    assert allowed(auth, Op.DESCRIBE)
    assert not allowed(auth, Op.READ)


def test_all_allows_and_denies_every_operation() -> None:
    everything = authorizer(acl(CLUSTER, "kafka-cluster", Op.ALL))
    for op in Op:
        if op not in (Op.UNKNOWN, Op.ANY):
            assert allowed(everything, op, CLUSTER, "kafka-cluster"), op
    auth = authorizer(acl(TXN, "*", Op.ALL), acl(TXN, "tx", Op.ALL, DENY, pattern=PREFIXED))
    assert allowed(auth, Op.WRITE, TXN, "t-1")
    assert not allowed(auth, Op.DESCRIBE, TXN, "tx-1")


def test_prefixed_patterns_match_names_that_begin_with_them() -> None:
    auth = authorizer(acl(GROUP, "billing-", Op.READ, pattern=PREFIXED))
    assert allowed(auth, Op.READ, GROUP, "billing-")
    assert allowed(auth, Op.READ, GROUP, "billing-eu")
    assert not allowed(auth, Op.READ, GROUP, "billing")


def test_the_wildcard_name_is_literal_star_a_prefixed_star_is_a_prefix() -> None:
    auth = authorizer(acl(TOPIC, "*", Op.READ))
    assert allowed(auth, Op.READ, name="anything")
    assert allowed(auth, Op.READ, name="*")
    # Kafka's quirk: the wildcard does not reach other names that begin with "*".
    assert not allowed(auth, Op.READ, name="*x")
    prefixed = authorizer(acl(TOPIC, "*", Op.READ, pattern=PREFIXED))
    assert not allowed(prefixed, Op.READ, name="anything")
    assert allowed(prefixed, Op.READ, name="*x")


def test_the_wildcard_principal_and_host() -> None:
    auth = authorizer(acl(TOPIC, "orders", Op.READ, principal="User:*", host="10.0.0.7"))
    assert allowed(auth, Op.READ, who=BOB, host="10.0.0.7")
    assert allowed(auth, Op.READ, who=KafkaPrincipal("Group", "ops"), host="10.0.0.7")
    assert not allowed(auth, Op.READ, who=BOB, host=HOST)


def test_super_users_may_do_everything_even_before_the_acls_load() -> None:
    auth = Authorizer(super_users=parse_super_users(" User:admin ; ;User:CN=ops,O=x"))
    ops = KafkaPrincipal("User", "CN=ops,O=x")
    assert auth.authorize(ops, HOST, Action(Op.ALTER, CLUSTER, "c")).rule == "SuperUser"
    with pytest.raises(AuthorizerNotReadyError, match="User:alice"):
        auth.authorize(ALICE, HOST, Action(Op.READ, TOPIC, "orders"))
    auth.complete_initial_load()
    assert not auth.authorize(ALICE, HOST, Action(Op.READ, TOPIC, "orders"))


def test_no_acl_found_follows_the_setting_but_any_acl_on_the_resource_denies_others() -> None:
    open_cluster = authorizer(
        acl(TOPIC, "orders", Op.READ, principal="User:bob"), allow_everyone=True
    )
    # Some ACL's pattern matches "orders": alice, with none of her own, is denied.
    decision = open_cluster.authorize(ALICE, HOST, Action(Op.READ, TOPIC, "orders"))
    assert (decision.allowed, decision.rule) == (False, "DefaultDeny")
    # No ACL's pattern matches "payments": the setting decides.
    decision = open_cluster.authorize(ALICE, HOST, Action(Op.READ, TOPIC, "payments"))
    assert (decision.allowed, decision.rule) == (True, "DefaultAllow")
    assert not allowed(authorizer(), Op.READ, name="payments")


def test_anonymous_is_a_principal_like_any_other() -> None:
    auth = authorizer(acl(TOPIC, "public", Op.READ, principal=str(ANONYMOUS)))
    assert allowed(auth, Op.READ, name="public", who=ANONYMOUS)
    assert not allowed(auth, Op.READ, name="public")


def test_replay_adds_and_removes_by_id() -> None:
    index = AclIndex()
    read = acl(TOPIC, "orders", Op.READ)
    index.replay(read)
    auth = Authorizer(index, loaded=True)
    assert allowed(auth, Op.READ)
    index.replay(RemoveAccessControlEntryRecord(read.acl_id))
    assert not allowed(auth, Op.READ)
    assert len(index) == 0
    index.replay(read)  # the same id may come back once removed
    assert index.acls() == [read]


def test_replay_refuses_what_the_controller_never_writes() -> None:
    read = acl(TOPIC, "orders", Op.READ, acl_id=UUID(int=7))
    index = AclIndex([read])
    with pytest.raises(MetadataReplayError, match="already exists"):
        index.add(acl(TOPIC, "other", Op.READ, acl_id=UUID(int=7)))
    with pytest.raises(MetadataReplayError, match="another id"):
        index.add(acl(TOPIC, "orders", Op.READ))
    with pytest.raises(MetadataReplayError, match="unknown ACL"):
        index.remove(UUID(int=8))


def test_principals_parse_at_the_first_colon() -> None:
    assert parse_principal("User:CN=a:b") == KafkaPrincipal("User", "CN=a:b")
    assert str(parse_principal("Group:ops")) == "Group:ops"
    with pytest.raises(InvalidAclError, match="'alice' is not Type:name"):
        parse_principal("alice")
    with pytest.raises(ConfigError, match=r"super\.users entry 'admin'"):
        parse_super_users("User:a;admin")


def test_decisions_are_truthy_as_their_outcome() -> None:
    auth = authorizer(acl(TOPIC, "orders", Op.READ))
    assert auth.authorize(ALICE, HOST, Action(Op.READ, TOPIC, "orders"))
    assert not auth.authorize(ALICE, HOST, Action(Op.WRITE, TOPIC, "orders"))
