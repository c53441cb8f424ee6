"""Kafka 4.4.0's own answers (tests/security/gold/KafkaSecurityGold.java, run against its jars;
the file's header says how to regenerate them): the ACL and SCRAM codes and record api keys,
StandardAuthorizer's decisions over a fixed ACL set (every question) and 40 seeded random sets
(`authorize`, and `authorizeByResourceType` for every caller, host, operation and type),
SCRAM credentials from ScramFormatter, and a whole SCRAM exchange as Kafka writes it."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from acl_helpers import binding_of_row

from replog.common.acl_codes import AclOperation, AclPermissionType, PatternType, ResourceType
from replog.common.scram_mechanism import MECHANISM_BY_NAME, MIN_ITERATIONS, SCRAM_MECHANISMS
from replog.quorum.metadata.records import API_KEYS
from replog.security.acl_index import AclIndex
from replog.security.authorizer import Action, Authorizer
from replog.security.principal import parse_principal, parse_super_users
from replog.security.resource_type_authorization import authorize_by_resource_type
from replog.security.scram_client import ScramClient
from replog.security.scram_credential import derive_credential, salted_password
from replog.security.scram_server import ScramServer

GOLD = [
    json.loads(line)
    for line in (Path(__file__).parent / "gold" / "kafka_security_gold.jsonl")
    .read_text()
    .split("\n")
    if line
]


def of_kind(kind: str) -> list[dict[str, Any]]:
    return [entry for entry in GOLD if entry["kind"] == kind]


(CODES,) = of_kind("codes")
(TABLES,) = of_kind("tables")


@pytest.mark.parametrize(
    ("prefix", "enum"),
    [
        ("resource_type", ResourceType),
        ("pattern_type", PatternType),
        ("operation", AclOperation),
        ("permission_type", AclPermissionType),
    ],
)
def test_acl_codes_are_kafkas(prefix: str, enum: type[Any]) -> None:
    kafkas = {key.split(".", 1)[1]: code for key, code in CODES.items() if key.startswith(prefix)}
    assert {member.name: int(member) for member in enum} == kafkas


def test_scram_codes_iterations_and_record_api_keys_are_kafkas() -> None:
    for mechanism in SCRAM_MECHANISMS:
        assert CODES[f"scram_mechanism.{mechanism.mechanism_name}"] == mechanism.code
        assert CODES[f"min_iterations.{mechanism.mechanism_name}"] == MIN_ITERATIONS
    for record_type, api_key in API_KEYS.items():
        assert CODES.get(f"api_key.{record_type.__name__}", api_key) == api_key
    assert sum(key.startswith("api_key.") for key in CODES) == 4


def fixed_questions() -> list[list[int]]:
    """The questions of the fixed set, in the Java program's loop order."""
    return [
        [caller, host, op, resource_type, name]
        for caller, host, op, resource_type, name in itertools.product(
            range(len(TABLES["callers"])),
            range(len(TABLES["hosts"])),
            TABLES["operations"],
            TABLES["resource_types"],
            range(len(TABLES["names"])),
        )
    ]


AUTHORIZER_RUNS = of_kind("authorizer")


def authorizer_of(run: dict[str, Any]) -> Authorizer:
    acls = [binding_of_row(row).with_id(UUID(int=i)) for i, row in enumerate(run["acls"])]
    return Authorizer(
        AclIndex(acls),
        super_users=parse_super_users(run["super_users"]),
        allow_everyone_if_no_acl_found=run["allow_everyone"],
        loaded=True,
    )


RUN_IDS = [f"{r['label']}-{r['allow_everyone']}" for r in AUTHORIZER_RUNS]


@pytest.mark.parametrize("run", AUTHORIZER_RUNS, ids=RUN_IDS)
def test_decisions_are_standard_authorizers(run: dict[str, Any]) -> None:
    authorizer = authorizer_of(run)
    questions = run.get("queries") or fixed_questions()
    assert len(questions) == len(run["allowed"])
    wrong = []
    for (caller, host, op, rtype, name), kafka in zip(questions, run["allowed"], strict=True):
        action = Action(AclOperation(op), ResourceType(rtype), TABLES["names"][name])
        principal = parse_principal(TABLES["callers"][caller])
        ours = authorizer.authorize(principal, TABLES["hosts"][host], action).allowed
        if ours != (kafka == "1"):
            wrong.append((str(principal), TABLES["hosts"][host], action, kafka))
    assert not wrong, wrong[:5]


@pytest.mark.parametrize("run", AUTHORIZER_RUNS, ids=RUN_IDS)
def test_decisions_by_resource_type_are_standard_authorizers(run: dict[str, Any]) -> None:
    authorizer = authorizer_of(run)
    questions = itertools.product(
        TABLES["callers"], TABLES["hosts"], TABLES["operations"], TABLES["resource_types"]
    )
    wrong = []
    for (caller, host, op, rtype), kafka in zip(questions, run["by_type_allowed"], strict=True):
        principal = parse_principal(caller)
        operation, resource_type = AclOperation(op), ResourceType(rtype)
        ours = authorize_by_resource_type(authorizer, principal, host, operation, resource_type)
        if ours != (kafka == "1"):
            wrong.append((caller, host, operation.name, resource_type.name, kafka))
    assert not wrong, wrong[:5]


@pytest.mark.parametrize("entry", of_kind("credential"), ids=lambda e: f"{e['mechanism']}")
def test_credentials_are_scram_formatters(entry: dict[str, Any]) -> None:
    mechanism = MECHANISM_BY_NAME[entry["mechanism"]]
    salt = bytes.fromhex(entry["salt"])
    salted = salted_password(mechanism, entry["password"], salt, entry["iterations"])
    assert salted.hex() == entry["salted_password"]
    credential = derive_credential(mechanism, entry["password"], salt, entry["iterations"])
    assert credential.stored_key.hex() == entry["stored_key"]
    assert credential.server_key.hex() == entry["server_key"]


@pytest.mark.parametrize("entry", of_kind("exchange"), ids=lambda e: f"{e['mechanism']}")
def test_an_exchange_is_byte_for_byte_kafkas(entry: dict[str, Any]) -> None:
    mechanism = MECHANISM_BY_NAME[entry["mechanism"]]
    salt = bytes.fromhex(entry["salt"])
    credential = derive_credential(mechanism, entry["password"], salt, 4096)
    client = ScramClient(mechanism, entry["user"], entry["password"], entry["client_nonce"])
    server = ScramServer(
        mechanism, {entry["user"]: credential}.get, server_nonce=entry["server_nonce"]
    )
    first = client.respond(b"")
    assert first == entry["client_first"].encode()
    server_first = server.respond(first)
    assert server_first == entry["server_first"].encode()
    final = client.respond(server_first)
    assert final == entry["client_final"].encode()
    server_final = server.respond(final)
    assert server_final == entry["server_final"].encode()
    assert client.respond(server_final) is None
    assert client.complete and server.complete
    assert server.authorization_id == entry["user"]
