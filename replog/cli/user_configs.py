"""`replog configs describe|alter --entity-type users`: SCRAM credentials, as kafka-configs.sh
manages them.

- `alter --entity-type users --entity-name alice --add-config
  'SCRAM-SHA-512=[iterations=8192,password=alice-secret]'` sets alice's credential for that
  mechanism (iterations default to 4096); `--delete-config SCRAM-SHA-512` removes it. One
  AlterUserScramCredentials request; the password is salted on this side and never sent.
  Prints `Completed updating config for user alice.` As from kafka-configs.sh against a KRaft
  cluster, two changes of one user in one command (two mechanisms) are refused by the
  controller (DUPLICATE_RESOURCE): one command per mechanism.
- `describe --entity-type users [--entity-name alice]` prints, per user (every user with a
  credential when none is named), `SCRAM credential configs for user-principal 'alice' are
  SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096`, or for a user without any,
  `Error retrieving SCRAM credential configs for user-principal 'bob':
  ResourceNotFoundException: ...` (kafka-configs.sh's lines).

Refusals, one line on stderr with exit code 1: a key that is not a SCRAM mechanism (user
quotas are not served), a mechanism value without a password or with an unknown field, the
controller's refusal of a user (iterations outside 4096..16384, a credential to delete that
does not exist).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from replog.common.scram_mechanism import MECHANISM_BY_NAME
from replog.errors import KafkaError, ReplogError

if TYPE_CHECKING:
    from replog.admin.user_scram_credentials import ScramUserDeletion, ScramUserUpsertion

_FIELDS = ("iterations", "password")


def _mechanism(key: str, option: str) -> str:
    if key.upper() not in MECHANISM_BY_NAME:
        raise ReplogError(
            f"{option} {key}: not a SCRAM mechanism ({', '.join(MECHANISM_BY_NAME)}); user "
            "quotas are not served"
        )
    return key.upper()


def scram_changes(
    user: str, added: dict[str, str], deleted: Sequence[str]
) -> tuple[list[ScramUserDeletion], list[ScramUserUpsertion]]:
    """The deletions and upsertions `--add-config` and `--delete-config` ask for
    (`SCRAM-SHA-256=iterations=8192,password=...`, brackets already removed)."""
    from replog.admin.user_scram_credentials import (
        DEFAULT_ITERATIONS,
        ScramUserDeletion,
        ScramUserUpsertion,
    )

    upsertions = []
    for key, value in added.items():
        mechanism = _mechanism(key, "--add-config")
        fields: dict[str, str] = {}
        for item in value.split(","):
            name, equals, text = item.partition("=")
            name = name.strip()
            if not equals or name not in _FIELDS:
                raise ReplogError(
                    f"--add-config {mechanism}: expected [iterations=N,]password=P, got a "
                    f"field {name!r}"
                )
            fields[name] = text
        if not fields.get("password"):
            raise ReplogError(f"--add-config {mechanism}: password is required")
        try:
            iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
        except ValueError:
            raise ReplogError(
                f"--add-config {mechanism}: iterations={fields['iterations']!r} is not a number"
            ) from None
        upsertions.append(ScramUserUpsertion(user, mechanism, fields["password"], iterations))
    deletions = [ScramUserDeletion(user, _mechanism(k, "--delete-config")) for k in deleted]
    return deletions, upsertions


def java_exception_name(error: KafkaError) -> str:
    """RESOURCE_NOT_FOUND -> ResourceNotFoundException, as Kafka's tools name errors."""
    return "".join(w.capitalize() for w in error.error_name.split("_")) + "Exception"


def run_describe_users(args: argparse.Namespace) -> int:
    from replog.cli.controller_connection import connect

    users = None if args.entity_name is None else [args.entity_name]
    with connect(args) as client:
        answers = client.describe_user_scram_credentials(users)
    for answer in answers:
        who = f"user-principal '{answer.user}'"
        if answer.error is not None:
            print(
                f"Error retrieving SCRAM credential configs for {who}: "
                f"{java_exception_name(answer.error)}: {answer.error}"
            )
            continue
        text = ", ".join(f"{name}=iterations={count}" for name, count in answer.credentials)
        print(f"SCRAM credential configs for {who} are {text}")
    return 0


def run_alter_users(args: argparse.Namespace, added: dict[str, str], deleted: Sequence[str]) -> int:
    from replog.cli.controller_connection import connect

    if not args.entity_name:
        raise ReplogError("--entity-type users needs --entity-name (a user name)")
    deletions, upsertions = scram_changes(args.entity_name, added, deleted)
    with connect(args) as client:
        answers = client.alter_user_scram_credentials(deletions, upsertions)
    error = answers.get(args.entity_name)
    if args.entity_name not in answers:
        raise ReplogError(f"the broker's answer says nothing of user {args.entity_name}")
    if error is not None:
        raise error
    print(f"Completed updating config for user {args.entity_name}.")
    return 0
