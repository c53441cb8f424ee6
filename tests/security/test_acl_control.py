"""CreateAcls and DeleteAcls decisions (`acl_control`) and the filters they use
(`acl_bindings`): Kafka 4.4.0's AclBindingFilter answers over every ACL of the golden file, and
one scenario per rule of the controller's AclControlManager."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from acl_helpers import DENY, GROUP, PREFIXED, TOPIC, Op, acl, binding_of_row

from replog.common.acl_codes import AclOperation, AclPermissionType, PatternType, ResourceType
from replog.errors import InvalidAclError
from replog.quorum.metadata.records import AccessControlEntryRecord
from replog.security.acl_bindings import AclBinding, AclBindingFilter
from replog.security.acl_control import create_acls, delete_acls
from replog.security.acl_index import AclIndex
from replog.security.authorizer import Action, Authorizer
from replog.security.principal import KafkaPrincipal

GOLD = [
    json.loads(line)
    for line in (Path(__file__).parent / "gold" / "kafka_security_gold.jsonl")
    .read_text()
    .splitlines()
]


def golden_bindings() -> list[AclBinding]:
    """Every ACL the Java program's filters ran over: the fixed set's, then each random set's."""
    runs = [e for e in GOLD if e["kind"] == "authorizer"]
    sets = [runs[0]["acls"]] + [r["acls"] for r in runs if r["label"].startswith("random-")]
    return [binding_of_row(row) for row in itertools.chain(*sets)]


FILTERS = [e for e in GOLD if e["kind"] == "filter"]


def test_filters_match_as_kafkas_acl_binding_filter() -> None:
    bindings = golden_bindings()
    wrong = []
    for entry in FILTERS:
        binding_filter = AclBindingFilter(
            ResourceType(entry["resource_type"]),
            entry["name"],
            PatternType(entry["pattern_type"]),
            entry["principal"],
            entry["host"],
            AclOperation(entry["operation"]),
            AclPermissionType(entry["permission_type"]),
        )
        assert len(entry["matches"]) == len(bindings)
        for binding, kafka in zip(bindings, entry["matches"], strict=True):
            if binding_filter.matches(binding) != (kafka == "1"):
                wrong.append((binding_filter, binding, kafka))
    assert not wrong, wrong[:3]


def ids() -> Any:
    counter = itertools.count(100)
    return lambda: UUID(int=next(counter))


def binding(record: AccessControlEntryRecord) -> AclBinding:
    return AclBinding.of(record)


def test_created_acls_are_records_and_equal_ones_succeed_without_one() -> None:
    stored = acl(TOPIC, "orders", Op.READ)
    index = AclIndex([stored])
    write = binding(acl(TOPIC, "orders", Op.WRITE))
    records, results = create_acls(index, [binding(stored), write, write], ids())
    assert results == [None, None, None]
    assert records == [write.with_id(UUID(int=100))]
    for record in records:
        index.replay(record)
    alice = KafkaPrincipal("User", "alice")
    assert Authorizer(index, loaded=True).authorize(alice, "h", Action(Op.WRITE, TOPIC, "orders"))


def test_a_new_id_is_drawn_again_while_it_names_a_stored_acl() -> None:
    index = AclIndex([acl(TOPIC, "a", Op.READ, acl_id=UUID(int=100))])
    records, _ = create_acls(index, [binding(acl(TOPIC, "b", Op.READ))], ids())
    assert [r.acl_id for r in records] == [UUID(int=101)]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"resource_type": ResourceType.ANY}, "Invalid resourceType ANY"),
        ({"pattern_type": PatternType.MATCH}, "Invalid patternType MATCH"),
        ({"operation": AclOperation.UNKNOWN}, "Invalid operation UNKNOWN"),
        ({"permission_type": AclPermissionType.ANY}, "Invalid permissionType ANY"),
        ({"resource_name": ""}, "Resource name should not be empty"),
        ({"principal": "alice"}, "principal 'alice' is not Type:name"),
    ],
)
def test_a_bad_binding_is_answered_with_its_error_and_the_others_go_on(
    changes: dict[str, Any], expected: str
) -> None:
    good = binding(acl(GROUP, "g", Op.READ))
    bad = AclBinding(**{**_fields(good), **changes})
    records, results = create_acls(AclIndex(), [bad, good], ids())
    assert isinstance(results[0], InvalidAclError) and expected in str(results[0])
    assert results[1] is None and len(records) == 1


def _fields(value: AclBinding) -> dict[str, Any]:
    return {name: getattr(value, name) for name in AclBinding.__dataclass_fields__}


def test_deletes_remove_each_matched_acl_once_and_answer_each_filter() -> None:
    read = acl(TOPIC, "orders", Op.READ, acl_id=UUID(int=1))
    deny = acl(TOPIC, "ord", Op.WRITE, DENY, pattern=PREFIXED, acl_id=UUID(int=2))
    group = acl(GROUP, "g", Op.READ, acl_id=UUID(int=3))
    index = AclIndex([read, deny, group])
    by_resource = AclBindingFilter(TOPIC, "orders", PatternType.MATCH)
    denies = AclBindingFilter(permission_type=AclPermissionType.DENY)
    unknown = AclBindingFilter(operation=AclOperation.UNKNOWN)
    records, results = delete_acls(index, [by_resource, denies, unknown])
    assert [r.acl_id for r in records] == [UUID(int=1), UUID(int=2)]
    assert results[0] == [binding(read), binding(deny)]
    assert results[1] == [binding(deny)]
    assert isinstance(results[2], InvalidAclError) and "Unknown entryFilter" in str(results[2])
    _, (error,) = delete_acls(index, [AclBindingFilter(pattern_type=PatternType.UNKNOWN)])
    assert isinstance(error, InvalidAclError) and "Unknown patternFilter" in str(error)
