"""The authorizer against its reference model (`acl_helpers.model_allows`: every ACL looked at,
by the rules alone), over random ACL sets and random questions, and over random replays of adds
and removes: the index's answers never differ from the model's over the live ACLs."""

from __future__ import annotations

from uuid import UUID

from acl_helpers import model_allows
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.common.acl_codes import (
    STORED_OPERATIONS,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from replog.quorum.metadata.records import (
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
)
from replog.security.acl_bindings import AclBinding
from replog.security.acl_index import AclIndex
from replog.security.authorizer import Action, Authorizer
from replog.security.principal import parse_principal

# Small alphabets, so prefixes, wildcards and collisions are common.
NAMES = st.text("ab*", min_size=1, max_size=4)
TYPES = st.sampled_from([ResourceType.TOPIC, ResourceType.GROUP])
PRINCIPALS = st.sampled_from(["User:alice", "User:bob", "User:*", "Group:alice"])
CALLERS = st.sampled_from(["User:alice", "User:bob", "Group:alice", "User:admin"])
HOSTS = st.sampled_from(["*", "10.0.0.1", "10.0.0.2"])
CALLER_HOSTS = st.sampled_from(["10.0.0.1", "10.0.0.2"])
OPERATIONS = st.sampled_from(sorted(STORED_OPERATIONS))


@st.composite
def acls(draw: st.DrawFn, acl_id: int) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        acl_id=UUID(int=acl_id),
        resource_type=draw(TYPES),
        resource_name=draw(NAMES),
        pattern_type=draw(st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED])),
        principal=draw(PRINCIPALS),
        host=draw(HOSTS),
        operation=draw(OPERATIONS),
        permission_type=draw(st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY])),
    )


@st.composite
def acl_sets(draw: st.DrawFn) -> list[AccessControlEntryRecord]:
    drawn = [draw(acls(i)) for i in range(draw(st.integers(0, 12)))]
    unique: dict[AclBinding, AccessControlEntryRecord] = {}
    for acl in drawn:
        unique.setdefault(AclBinding.of(acl), acl)
    return list(unique.values())


questions = st.tuples(CALLERS, CALLER_HOSTS, OPERATIONS, TYPES, NAMES)


def agrees(
    authorizer: Authorizer,
    live: list[AccessControlEntryRecord],
    question: tuple[str, str, AclOperation, ResourceType, str],
) -> bool:
    caller, host, operation, resource_type, name = question
    decision = authorizer.authorize(
        parse_principal(caller), host, Action(operation, resource_type, name)
    )
    expected = model_allows(
        live,
        set(authorizer.super_users),
        authorizer.allow_everyone_if_no_acl_found,
        caller,
        host,
        operation,
        resource_type,
        name,
    )
    return decision.allowed == expected


@settings(max_examples=400, deadline=None)
@given(acl_sets(), st.booleans(), st.lists(questions, min_size=1, max_size=20))
def test_decisions_equal_the_model(
    live: list[AccessControlEntryRecord],
    allow_everyone: bool,
    asked: list[tuple[str, str, AclOperation, ResourceType, str]],
) -> None:
    authorizer = Authorizer(
        AclIndex(live),
        super_users=frozenset({"User:admin"}),
        allow_everyone_if_no_acl_found=allow_everyone,
        loaded=True,
    )
    for question in asked:
        assert agrees(authorizer, live, question), question


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_replayed_adds_and_removes_keep_the_index_equal_to_the_live_set(
    data: st.DataObject,
) -> None:
    index = AclIndex()
    authorizer = Authorizer(index, loaded=True)
    live: dict[UUID, AccessControlEntryRecord] = {}
    for step in range(data.draw(st.integers(1, 30))):
        if live and data.draw(st.booleans()):
            gone = data.draw(st.sampled_from(sorted(live)))
            index.replay(RemoveAccessControlEntryRecord(gone))
            del live[gone]
        else:
            acl = data.draw(acls(1000 + step))
            if AclBinding.of(acl) in {AclBinding.of(a) for a in live.values()}:
                continue
            index.replay(acl)
            live[acl.acl_id] = acl
        assert index.acls() == [live[i] for i in sorted(live)]
        question = data.draw(questions)
        assert agrees(authorizer, list(live.values()), question), question
