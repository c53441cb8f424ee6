"""`replog features describe|upgrade|downgrade|disable`: the cluster's feature levels, shown and
changed as `kafka-features.sh` (Kafka's FeatureCommand) shows and changes them.

- describe: one line per feature the answering node supports, by name: its supported range
  and finalized level (0: not finalized; `metadata.version` by its name, such as 3.6-IV0), and
  the epoch of the finalized levels ("-" when none is known).
- upgrade and downgrade: `--feature NAME=LEVEL` (repeatable), `--metadata VERSION` (Kafka's
  deprecated form of `--feature metadata.version=LEVEL`), or `--release-version VERSION`
  alone: `metadata.version` at that release's level and every other feature this code knows at
  the level Kafka gives it for that release (0 for every release replog knows; an upgrade leaves
  out the features at 0, as Kafka's tool does). A downgrade is safe unless `--unsafe`.
- disable: `--feature NAME` (repeatable) to level 0, safe unless `--unsafe`.
- `--dry-run` asks the controller to validate only. One line per feature, by name: "NAME was
  upgraded to LEVEL." ("can be" for a dry run), or "Could not upgrade NAME to LEVEL. REASON"
  ("Can not" for a dry run), then a failure count on stderr and exit status 1 if any failed.
  The controller applies a request whole or not at all, so every feature shares the reason.

Where it asks: as `replog quorum describe`, a broker's Kafka listener (`--bootstrap-server`,
which forwards a change to the active controller) or a controller's (`--bootstrap-controller`).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import Any

from replog.cli.arguments import add_command
from replog.cli.controller_connection import add_connection_arguments, connect
from replog.common import metadata_versions
from replog.common.feature_update import FeatureUpdate, UpgradeType
from replog.errors import KafkaError, ReplogError

# The features besides metadata.version that a release version sets, with Kafka's level of each
# for every release replog knows (its FeatureVersion bootstrap versions are all later).
RELEASE_FEATURES = ("eligible.leader.replicas.version", "transaction.version")
METADATA_VERSION_FEATURE = metadata_versions.FEATURE
METADATA_DEPRECATED = " `metadata` flag is deprecated and may be removed in a future release."


def register(commands: Any) -> None:
    action = add_command(commands, "features", __doc__, headed=True)
    describe = action("describe", "describe the current active feature flags", run_describe)
    add_connection_arguments(describe, controllers=True)
    for name, verb in (("upgrade", "upgrade"), ("downgrade", "downgrade")):
        change = action(name, f"{verb} one or more feature flags", run_change)
        change.add_argument(
            "--metadata",
            metavar="VERSION",
            help=f"deprecated: the metadata.version to {verb} to, for example 3.3-IV3",
        )
        change.add_argument(
            "--release-version",
            metavar="VERSION",
            help=f"the release version to {verb} every feature to, for example 3.6-IV0",
        )
        change.add_argument(
            "--feature",
            action="append",
            metavar="NAME=LEVEL",
            help=f"a feature {verb}, for example metadata.version=12 (repeatable)",
        )
        if name == "downgrade":
            change.add_argument(
                "--unsafe",
                action="store_true",
                help="perform this downgrade even if it may irreversibly destroy metadata",
            )
        change.add_argument(
            "--dry-run", action="store_true", help=f"validate this {verb}, but do not perform it"
        )
        add_connection_arguments(change, controllers=True)
    disable = action(
        "disable", "disable one or more feature flags (a downgrade to level 0)", run_disable
    )
    disable.add_argument(
        "--feature", action="append", metavar="NAME", help="a feature flag to disable"
    )
    disable.add_argument(
        "--unsafe",
        action="store_true",
        help="disable this feature flag even if it may irreversibly destroy metadata",
    )
    disable.add_argument(
        "--dry-run", action="store_true", help="perform a dry run of this disable operation"
    )
    add_connection_arguments(disable, controllers=True)


def run_describe(args: argparse.Namespace) -> int:
    with connect(args) as client:
        features = client.describe_features()
    epoch = "-" if features.epoch is None else str(features.epoch)
    for name in sorted(features.supported):
        low, high = features.supported[name]
        finalized = features.finalized.get(name, 0)
        print(
            f"Feature: {name:<40}  SupportedMinVersion: {level_text(name, low):<15}  "
            f"SupportedMaxVersion: {level_text(name, high):<15}  "
            f"FinalizedVersionLevel: {level_text(name, finalized):<15}  Epoch: {epoch}"
        )
    return 0


def level_text(feature: str, level: int) -> str:
    """A level as Kafka's tool prints it: `metadata.version` by its name."""
    if feature != METADATA_VERSION_FEATURE:
        return str(level)
    return metadata_versions.name_of(level) or f"UNKNOWN {level}"


def run_change(args: argparse.Namespace) -> int:
    op = args.action
    kind = UpgradeType.UPGRADE
    if op == "downgrade":
        kind = UpgradeType.UNSAFE_DOWNGRADE if args.unsafe else UpgradeType.SAFE_DOWNGRADE
    features: list[str] = args.feature or []
    if args.release_version is not None and (args.metadata is not None or features):
        raise ReplogError("Can not specify `release-version` with other feature flags.")
    updates: dict[str, FeatureUpdate] = {}
    if args.release_version is not None:
        level = _metadata_level(args.release_version)
        updates[METADATA_VERSION_FEATURE] = FeatureUpdate(METADATA_VERSION_FEATURE, level, kind)
        if kind is not UpgradeType.UPGRADE:  # an upgrade sends no feature to level 0
            for name in RELEASE_FEATURES:
                updates[name] = FeatureUpdate(name, 0, kind)
    if args.metadata is not None:
        print(METADATA_DEPRECATED)
        level = _metadata_level(args.metadata)
        updates[METADATA_VERSION_FEATURE] = FeatureUpdate(METADATA_VERSION_FEATURE, level, kind)
    for text in features:
        name, level = parse_name_and_level(text)
        if name in updates:
            raise ReplogError(f"Feature {name} was specified more than once.")
        updates[name] = FeatureUpdate(name, level, kind)
    return _update(args, op, list(updates.values()))


def run_disable(args: argparse.Namespace) -> int:
    kind = UpgradeType.UNSAFE_DOWNGRADE if args.unsafe else UpgradeType.SAFE_DOWNGRADE
    updates: dict[str, FeatureUpdate] = {}
    for name in args.feature or []:
        if name in updates:
            raise ReplogError(f"Feature {name} was specified more than once.")
        updates[name] = FeatureUpdate(name, 0, kind)
    return _update(args, "disable", list(updates.values()))


def parse_name_and_level(text: str) -> tuple[str, int]:
    """`NAME=LEVEL`, as Kafka's tool parses it (a level is a Java short)."""
    if "=" not in text:
        raise ReplogError(f"Can't parse feature=level string {text}: equals sign not found.")
    name, level_string = (part.strip() for part in text.split("=", 1))
    if not re.fullmatch(r"[+-]?[0-9]+", level_string) or not (
        -(2**15) <= int(level_string) < 2**15
    ):
        raise ReplogError(
            f"Can't parse feature=level string {text}: unable to parse {level_string} as a short."
        )
    return name, int(level_string)


def _metadata_level(version: str) -> int:
    level = metadata_versions.level_of(version)
    if level is None:
        raise ReplogError(
            f"Unknown metadata.version {version}. Supported metadata.version are "
            f"{', '.join(metadata_versions.NAMES.values())}"
        )
    return level


def _update(args: argparse.Namespace, op: str, updates: Sequence[FeatureUpdate]) -> int:
    if not updates:
        raise ReplogError(f"You must specify at least one feature to {op}")
    failure: KafkaError | None = None
    with connect(args) as client:
        try:
            client.update_features(updates, validate_only=args.dry_run)
        except KafkaError as error:
            failure = error
    for update in sorted(updates, key=lambda u: u.feature):
        name, level = update.feature, update.level
        if failure is not None:
            what = f"disable {name}" if op == "disable" else f"{op} {name} to {level}"
            print(f"{'Can not' if args.dry_run else 'Could not'} {what}. {failure}")
        else:
            done = "disabled." if op == "disable" else f"{op}d to {level}."
            print(f"{name}{' can be ' if args.dry_run else ' was '}{done}")
    if failure is not None:
        raise ReplogError(f"{len(updates)} out of {len(updates)} operation(s) failed.")
    return 0
