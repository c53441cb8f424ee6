"""`replog acls`: add, remove and list ACLs, like `kafka-acls.sh`.

    replog acls --add --allow-principal User:alice [--allow-host H] --operation Read \\
        --topic orders [--resource-pattern-type literal|prefixed]
    replog acls --add --deny-principal User:bob --operation Write --topic orders
    replog acls --remove [--force] --allow-principal User:alice --operation Read --topic orders
    replog acls --remove --force --topic orders      # every ACL of the resource
    replog acls --list [--topic T | --group G | --cluster | --transactional-id I] \\
        [--principal User:alice] [--resource-pattern-type any|match|literal|prefixed]

Kafka's convenience flags for `--add` and `--remove` (the operations inferred, so without
`--operation` or a denied principal or host): `--producer --topic T` is Write, Describe and
Create on each topic, Write and Describe on each `--transactional-id`, and with `--idempotent`
IdempotentWrite on the cluster (literal, whatever `--resource-pattern-type`);
`--consumer --topic T --group G` is Read and Describe on each topic and Read on each group;
both in one command join their entries per resource.

Resources: `--topic`, `--group`, `--transactional-id` (each repeatable) and `--cluster`;
`--resource-pattern-type` is literal (the default), prefixed, or for --list and --remove also
any or match. `--operation` (repeatable, default All) takes Kafka's names in any case (Read,
Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs,
IdempotentWrite, All); an unknown one, or one the resource type does not support (Kafka's
table: a transactional id supports Describe and Write only), is refused naming it. Hosts
default to `*` for the principals named. `--remove` asks for confirmation (y/n) unless
`--force`. Output, as Kafka's tool prints it: per resource a line
"Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders,
patternType=LITERAL)`: " (for --list "Current ACLs for resource ..."), then each entry after a
tab, "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)", then an empty line.

The requests are Kafka's CreateAcls, DeleteAcls and DescribeAcls at a broker's Kafka listener
(`--bootstrap-server`, else the local cluster's in `--data-dir`); the broker forwards changes to
the active controller. Exit code 0; 1 with the broker's error on stderr (SECURITY_DISABLED when
the brokers run without `authorizer.class.name`, CLUSTER_AUTHORIZATION_FAILED for a caller
without ALTER or DESCRIBE on the cluster).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from replog.cli.arguments import add_documented_command
from replog.cli.controller_connection import add_connection_arguments, connect
from replog.common.acl_codes import (
    WILDCARD,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from replog.errors import ReplogError, answer_error
from replog.security.authorized_operations import SUPPORTED_OPERATIONS
from replog.security.principal import parse_principal

if TYPE_CHECKING:
    # Imported where a command runs: the ACL types load the metadata records, which `--help`
    # has no use for.
    from replog.admin.kafka_admin_client import KafkaAdminClient
    from replog.security.acl_bindings import AclBinding, AclBindingFilter

CLUSTER_NAME = "kafka-cluster"
PATTERN_TYPES = ("any", "match", "literal", "prefixed")
# Kafka's AclEntry.supportedOperations by name (ALL is allowed on every type).
SUPPORTED = {
    resource_type: {operation.name for operation in operations}
    for resource_type, operations in SUPPORTED_OPERATIONS.items()
}
OPERATIONS = [op for op in AclOperation if op.name not in ("UNKNOWN", "ANY")]


@dataclass(frozen=True, slots=True)
class Pattern:
    """A resource pattern (with ANY or MATCH, a pattern filter) as the tool names it."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return self.text("ResourcePattern")

    def text(self, kind: str) -> str:
        return (
            f"{kind}(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )


@dataclass(frozen=True, slots=True)
class Entry:
    """An access control entry: who, from where, what, allowed or denied."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
            f"permissionType={self.permission_type.name})"
        )


# --- pure parts -------------------------------------------------------------------------------


def pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def parse_operation(text: str) -> AclOperation:
    """Kafka's operation name in PascalCase or upper case ("IdempotentWrite",
    "IDEMPOTENT_WRITE"); anything else is a ReplogError naming it and the valid names."""
    wanted = text.strip()
    for op in OPERATIONS:
        if wanted in (pascal(op.name), pascal(op.name).upper(), op.name):
            return op
    valid = ", ".join(pascal(op.name) for op in OPERATIONS)
    raise ReplogError(f"--operation {text}: unknown operation; valid operations are {valid}")


def patterns(args: argparse.Namespace, *, required: bool) -> list[Pattern]:
    """The resources the arguments name, with the pattern type."""
    pattern_type = PatternType[args.resource_pattern_type.upper()]
    found = [
        Pattern(resource_type, name.strip() if strip else name, pattern_type)
        for resource_type, names, strip in (
            (ResourceType.TOPIC, args.topic, True),
            (ResourceType.GROUP, args.group, True),
            (ResourceType.TRANSACTIONAL_ID, args.transactional_id, False),
        )
        for name in names or ()
    ]
    if args.cluster and pattern_type == PatternType.LITERAL:
        found.insert(
            1 if args.topic else 0, Pattern(ResourceType.CLUSTER, CLUSTER_NAME, pattern_type)
        )
    if required and not found:
        raise ReplogError(
            "You must provide at least one resource: --topic <topic> or --cluster or --group "
            "<group> or --transactional-id <id>"
        )
    return found


def entries(
    args: argparse.Namespace, operations: Sequence[AclOperation] | None = None
) -> list[Entry]:
    """The entries of --allow/--deny principals and hosts times `operations` (default: those
    of --operation)."""
    if operations is None:
        operations = list(dict.fromkeys(parse_operation(o) for o in args.operation or ["All"]))
    found: list[Entry] = []
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
        (args.deny_principal, args.deny_host, AclPermissionType.DENY),
    ):
        if not principals:
            continue
        for principal in dict.fromkeys(p.strip() for p in principals):
            parse_principal(principal)  # "Type:name", else InvalidAclError naming it
            for op in operations:
                for host in dict.fromkeys(h.strip() for h in hosts or [WILDCARD]):
                    found.append(Entry(principal, host, op, permission))
    return found


# Kafka's AclCommand conveniences: the operations each role gets per resource type.
PRODUCER_OPERATIONS = {
    ResourceType.TOPIC: (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.WRITE, AclOperation.DESCRIBE),
}
CONSUMER_OPERATIONS = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.DESCRIBE),
    ResourceType.GROUP: (AclOperation.READ,),
}


def check_roles(args: argparse.Namespace) -> None:
    """Kafka's checks of --producer, --consumer and --idempotent."""
    roles = [f"--{r}" for r in ("producer", "consumer") if getattr(args, r)]
    if roles and (args.list or args.operation or args.deny_principal or args.deny_host):
        raise ReplogError(
            f"{' and '.join(roles)} cannot be used with --list, --operation, --deny-principal or "
            "--deny-host (the operations are inferred)"
        )
    if args.producer and not args.topic:
        raise ReplogError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise ReplogError("The --idempotent option is only available if --producer is set")
    if args.consumer and (
        not args.topic
        or not args.group
        or (not args.producer and (args.cluster or args.transactional_id))
    ):
        raise ReplogError(
            "With --consumer you must specify a --topic and a --group and no --cluster or "
            "--transactional-id option should be specified."
        )


def resource_entries(args: argparse.Namespace) -> list[tuple[Pattern, list[Entry]]]:
    """Each resource the arguments name with its entries: those of --operation, or what
    --producer and --consumer infer (module docstring), joined per resource."""
    if not (args.producer or args.consumer):
        named = entries(args)
        return [(pattern, named) for pattern in patterns(args, required=True)]
    resources = patterns(args, required=True)
    cluster = Pattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)
    if args.idempotent and cluster not in resources:
        # Kafka's AclCommand adds the literal cluster with --idempotent whatever the pattern
        # type of the other resources.
        resources.append(cluster)
    found: dict[Pattern, list[Entry]] = {}
    for role, table in (("producer", PRODUCER_OPERATIONS), ("consumer", CONSUMER_OPERATIONS)):
        if not getattr(args, role):
            continue
        for pattern in resources:
            operations = table.get(pattern.resource_type, ())
            if pattern.resource_type == ResourceType.CLUSTER and role == "producer":
                operations = (AclOperation.IDEMPOTENT_WRITE,) if args.idempotent else ()
            if operations:
                named = found.setdefault(pattern, [])
                named += [e for e in entries(args, operations) if e not in named]
    return list(found.items())


def check_operations(pattern: Pattern, named: Iterable[Entry]) -> None:
    supported = SUPPORTED[pattern.resource_type]
    for entry in named:
        if entry.operation != AclOperation.ALL and entry.operation.name not in supported:
            valid = ", ".join(sorted(pascal(o) for o in supported | {"ALL"}))
            raise ReplogError(
                f"--operation {pascal(entry.operation.name)}: ResourceType "
                f"{pattern.resource_type.name} only supports operations {valid}"
            )


def binding(pattern: Pattern, entry: Entry) -> AclBinding:
    from replog.security.acl_bindings import AclBinding

    return AclBinding(
        pattern.resource_type,
        pattern.name,
        pattern.pattern_type,
        entry.principal,
        entry.host,
        entry.operation,
        entry.permission_type,
    )


def binding_filter(pattern: Pattern | None, entry: Entry | None = None) -> AclBindingFilter:
    from replog.security.acl_bindings import AclBindingFilter

    return AclBindingFilter(
        ResourceType.ANY if pattern is None else pattern.resource_type,
        None if pattern is None else pattern.name,
        PatternType.ANY if pattern is None else pattern.pattern_type,
        None if entry is None else entry.principal,
        None if entry is None else entry.host,
        AclOperation.ANY if entry is None else entry.operation,
        AclPermissionType.ANY if entry is None else entry.permission_type,
    )


def block(title: str, pattern: Pattern, named: Sequence[Entry]) -> str:
    """Kafka's block: the title with the resource, then each entry after a tab."""
    lines = "\n".join(f"\t{e}" for e in named)
    return f"{title} `{pattern}`: \n {lines} \n"


def grouped(bindings: Iterable[AclBinding]) -> dict[Pattern, list[Entry]]:
    found: dict[Pattern, list[Entry]] = {}
    for b in bindings:
        entry = Entry(b.principal, b.host, b.operation, b.permission_type)
        named = found.setdefault(Pattern(b.resource_type, b.resource_name, b.pattern_type), [])
        if entry not in named:
            named.append(entry)
    return found


# --- the shell --------------------------------------------------------------------------------


def describe(client: KafkaAdminClient, wanted: AclBindingFilter) -> list[AclBinding]:
    from replog.kafka.messages.describe_acls_request import DescribeAclsRequest
    from replog.security.acl_bindings import AclBinding

    answer = client.describe_acls(
        DescribeAclsRequest(
            resource_type_filter=wanted.resource_type,
            resource_name_filter=wanted.resource_name,
            pattern_type_filter=wanted.pattern_type,
            principal_filter=wanted.principal,
            host_filter=wanted.host,
            operation=wanted.operation,
            permission_type=wanted.permission_type,
        )
    )
    return [
        AclBinding(
            ResourceType(r.resource_type),
            r.resource_name,
            PatternType(r.pattern_type),
            a.principal,
            a.host,
            AclOperation(a.operation),
            AclPermissionType(a.permission_type),
        )
        for r in answer.resources
        for a in r.acls
    ]


def run_add(args: argparse.Namespace) -> int:
    from replog.kafka.messages.create_acls_request import AclCreation

    if args.resource_pattern_type in ("any", "match"):
        raise ReplogError(
            f"A '--resource-pattern-type' value of '{args.resource_pattern_type.upper()}' is "
            "not valid when adding acls."
        )
    if not (args.allow_principal or args.deny_principal):
        raise ReplogError(
            "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs."
        )
    resources = resource_entries(args)
    for pattern, named in resources:
        check_operations(pattern, named)
    with connect(args) as client:
        for pattern, named in resources:
            print(block("Adding ACLs for resource", pattern, named))
            results = client.create_acls(
                [
                    AclCreation(
                        resource_type=b.resource_type,
                        resource_name=b.resource_name,
                        resource_pattern_type=b.pattern_type,
                        principal=b.principal,
                        host=b.host,
                        operation=b.operation,
                        permission_type=b.permission_type,
                    )
                    for b in (binding(pattern, e) for e in named)
                ]
            )
            _raise_answers((r.error_code, r.error_message) for r in results)
    return 0


def run_remove(args: argparse.Namespace) -> int:
    from replog.kafka.messages.delete_acls_request import DeleteAclsFilter

    resources = resource_entries(args)
    for pattern, named in resources:
        check_operations(pattern, named)
    with connect(args) as client:
        for pattern, named in resources:
            filter_text = pattern.text("ResourcePatternFilter")
            if named:
                question = (
                    "Are you sure you want to remove ACLs: \n "
                    + "\n".join(f"\t{e}" for e in named)
                    + f" \n from resource filter `{filter_text}`? (y/n)"
                )
            else:
                question = (
                    f"Are you sure you want to delete all ACLs for resource filter "
                    f"`{filter_text}`? (y/n)"
                )
            if not args.force and not _confirmed(question):
                continue
            filters = [binding_filter(pattern, e) for e in named] or [binding_filter(pattern)]
            results = client.delete_acls(
                [
                    DeleteAclsFilter(
                        resource_type_filter=f.resource_type,
                        resource_name_filter=f.resource_name,
                        pattern_type_filter=f.pattern_type,
                        principal_filter=f.principal,
                        host_filter=f.host,
                        operation=f.operation,
                        permission_type=f.permission_type,
                    )
                    for f in filters
                ]
            )
            _raise_answers((r.error_code, r.error_message) for r in results)
    return 0


def run_list(args: argparse.Namespace) -> int:
    resources = patterns(args, required=False)
    listed: list[AclBinding] = []
    with connect(args) as client:
        wanted: list[Pattern | None] = [*resources] if resources else [None]
        for pattern in wanted:
            listed.extend(describe(client, binding_filter(pattern)))
    found = grouped(listed)
    principals = list(dict.fromkeys(p.strip() for p in args.principal or ()))
    if not principals:
        for pattern, named in found.items():
            print(block("Current ACLs for resource", pattern, named))
        return 0
    for principal in principals:
        parse_principal(principal)
        print(f"ACLs for principal `{principal}`")
        for pattern, named in found.items():
            mine = [e for e in named if e.principal == principal]
            if mine:
                print(block("Current ACLs for resource", pattern, mine))
    return 0


def _confirmed(question: str) -> bool:
    print(question, flush=True)
    return sys.stdin.readline().strip().lower() == "y"


def _raise_answers(answers: Iterable[tuple[int, str | None]]) -> None:
    for code, message in answers:
        error = answer_error(code, message)
        if error is not None:
            raise error


def run(args: argparse.Namespace) -> int:
    actions = [a for a in ("add", "remove", "list") if getattr(args, a)]
    if len(actions) != 1:
        raise ReplogError("Command must include exactly one action: --list, --add, --remove.")
    if args.principal and not args.list:
        raise ReplogError("The --principal option is only available if --list is set")
    check_roles(args)
    if args.list and (
        args.allow_principal or args.deny_principal or args.allow_host or args.deny_host
    ):
        raise ReplogError(
            "--list takes no --allow-principal, --deny-principal, --allow-host or --deny-host "
            "(use --principal)"
        )
    return {"add": run_add, "remove": run_remove, "list": run_list}[actions[0]](args)


def register(commands: Any) -> None:
    parser = add_documented_command(commands, "acls", __doc__)
    parser.set_defaults(run=run)
    for action, text in (
        ("add", "add the ACLs the other options describe"),
        ("remove", "remove them (every ACL of the resource when no principal is named)"),
        ("list", "list the ACLs of the resources named (every ACL when none is)"),
    ):
        parser.add_argument(f"--{action}", action="store_true", help=text)
    parser.add_argument("--topic", action="append", metavar="T", help="a topic; repeatable")
    parser.add_argument("--group", action="append", metavar="G", help="a group; repeatable")
    parser.add_argument(
        "--transactional-id", action="append", metavar="ID", help="a transactional id; repeatable"
    )
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument(
        "--resource-pattern-type",
        choices=PATTERN_TYPES,
        type=str.lower,
        default="literal",
        help="the resources' pattern type (default: literal)",
    )
    parser.add_argument(
        "--operation",
        action="append",
        metavar="OP",
        help="an operation, Kafka's name (Read, Write, Describe, IdempotentWrite, ..., All: the "
        "default); repeatable",
    )
    for kind in ("allow", "deny"):
        parser.add_argument(
            f"--{kind}-principal",
            action="append",
            metavar="TYPE:NAME",
            help=f"a principal to {kind}, as User:alice; repeatable",
        )
        parser.add_argument(
            f"--{kind}-host",
            action="append",
            metavar="HOST",
            help=f"a host the {kind} applies to (default: *); repeatable",
        )
    parser.add_argument(
        "--principal", action="append", metavar="TYPE:NAME", help="with --list: only its ACLs"
    )
    parser.add_argument(
        "--producer",
        action="store_true",
        help="the producer role: Write, Describe and Create on each --topic (Write and Describe "
        "on each --transactional-id)",
    )
    parser.add_argument(
        "--idempotent",
        action="store_true",
        help="with --producer: IdempotentWrite on the cluster too",
    )
    parser.add_argument(
        "--consumer",
        action="store_true",
        help="the consumer role: Read and Describe on each --topic, Read on each --group",
    )
    parser.add_argument("--force", action="store_true", help="remove without asking")
    add_connection_arguments(parser)
