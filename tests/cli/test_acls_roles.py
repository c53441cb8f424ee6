"""`replog acls --producer`, `--consumer` and `--idempotent`: the entries Kafka's AclCommand
infers per resource, both roles joined, and its refusals of what they cannot be used with."""

from __future__ import annotations

import argparse

import pytest

from replog.cli.acls import check_roles, resource_entries
from replog.cli.main import build_parser
from replog.common.acl_codes import AclOperation, ResourceType
from replog.errors import ReplogError


def parsed(*words: str) -> argparse.Namespace:
    return build_parser().parse_args(["acls", *words])


def inferred(*words: str) -> dict[tuple[str, str], set[str]]:
    args = parsed(*words)
    check_roles(args)
    return {
        (pattern.resource_type.name, pattern.name): {e.operation.name for e in named}
        for pattern, named in resource_entries(args)
    }


ALICE = ("--add", "--allow-principal", "User:alice")


def test_the_producer_role() -> None:
    assert inferred(*ALICE, "--producer", "--topic", "t") == {
        ("TOPIC", "t"): {"WRITE", "DESCRIBE", "CREATE"}
    }
    assert inferred(*ALICE, "--producer", "--topic", "t", "--transactional-id", "tx") == {
        ("TOPIC", "t"): {"WRITE", "DESCRIBE", "CREATE"},
        ("TRANSACTIONAL_ID", "tx"): {"WRITE", "DESCRIBE"},
    }
    assert inferred(*ALICE, "--producer", "--idempotent", "--topic", "t") == {
        ("TOPIC", "t"): {"WRITE", "DESCRIBE", "CREATE"},
        ("CLUSTER", "kafka-cluster"): {"IDEMPOTENT_WRITE"},
    }
    # With prefixed topics too: the cluster's IdempotentWrite is always the literal one.
    prefixed = parsed(
        *ALICE, "--producer", "--idempotent", "--topic", "t", "--resource-pattern-type", "prefixed"
    )
    check_roles(prefixed)
    assert {
        (p.resource_type.name, p.name, p.pattern_type.name): {e.operation.name for e in named}
        for p, named in resource_entries(prefixed)
    } == {
        ("TOPIC", "t", "PREFIXED"): {"WRITE", "DESCRIBE", "CREATE"},
        ("CLUSTER", "kafka-cluster", "LITERAL"): {"IDEMPOTENT_WRITE"},
    }
    # --cluster without --idempotent gives the producer nothing there, as in Kafka.
    assert ("CLUSTER", "kafka-cluster") not in inferred(
        *ALICE, "--producer", "--topic", "t", "--cluster"
    )


def test_the_consumer_role_and_both_joined() -> None:
    assert inferred(*ALICE, "--consumer", "--topic", "t", "--group", "g") == {
        ("TOPIC", "t"): {"READ", "DESCRIBE"},
        ("GROUP", "g"): {"READ"},
    }
    both = inferred(*ALICE, "--producer", "--consumer", "--topic", "t", "--group", "g")
    assert both == {
        ("TOPIC", "t"): {"WRITE", "DESCRIBE", "CREATE", "READ"},
        ("GROUP", "g"): {"READ"},
    }


def test_each_entry_is_every_principal_and_host() -> None:
    args = parsed(
        "--add", "--allow-principal", "User:a", "--allow-principal", "User:b", "--allow-host",
        "10.0.0.1", "--consumer", "--topic", "t", "--group", "g",
    )  # fmt: skip
    ((topic, entries), (group, group_entries)) = resource_entries(args)
    assert topic.resource_type == ResourceType.TOPIC and group.resource_type == ResourceType.GROUP
    assert {(e.principal, e.host, e.operation) for e in group_entries} == {
        ("User:a", "10.0.0.1", AclOperation.READ),
        ("User:b", "10.0.0.1", AclOperation.READ),
    }
    assert len(entries) == 4


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (("--producer", "--operation", "Read", "--topic", "t"), "cannot be used with"),
        (("--consumer", "--deny-principal", "User:x", "--topic", "t", "--group", "g"), "cannot"),
        (("--producer",), "With --producer you must specify a --topic"),
        (("--idempotent", "--topic", "t"), "only available if --producer is set"),
        (("--consumer", "--topic", "t"), "With --consumer you must specify a --topic and a"),
        (("--consumer", "--topic", "t", "--group", "g", "--cluster"), "no --cluster"),
    ],
)
def test_refusals_say_what_is_wrong(words: tuple[str, ...], said: str) -> None:
    with pytest.raises(ReplogError, match=said):
        check_roles(parsed(*ALICE, *words))


def test_list_takes_neither_role() -> None:
    with pytest.raises(ReplogError, match="cannot be used with --list"):
        check_roles(parsed("--list", "--producer", "--topic", "t"))
