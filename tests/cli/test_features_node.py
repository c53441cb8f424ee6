"""`replog features` against a real node (`replog node`, broker and controller) whose metadata
log began at metadata.version 3.3-IV3 (`bootstrap.metadata.version=7`), the level logs of
earlier replog releases hold:

- describe prints kafka-features.sh's lines: each supported range and finalized level
  (metadata.version by name), and the epoch;
- a SCRAM user is refused ("The current metadata.version does not support SCRAM") until
  `upgrade --metadata 3.6-IV0`; a dry run first changes nothing; after the upgrade the broker's
  ApiVersions finalizes 3.6-IV0 and the same user is created;
- transaction.version goes down to 1, is disabled, and comes back to 2;
- eligible.leader.replicas.version is refused at 3.3-IV3, then turned on at 3.6-IV0, disabled
  and turned on again; metadata.version may not then go below 3.6-IV0;
- a downgrade of metadata.version to 3.3-IV3 is refused with Kafka 4's message, one line per
  feature and the failure count on stderr, exit status 1; so is a level no node supports.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from cli_runner import Outcome, replog

from tests.eventually import wait_until
from tests.kafka.kafka_node import RunningNode, running_node

SCRAM_ALICE = "SCRAM-SHA-256=[iterations=8192,password=alice-secret]"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningNode]:
    root = tmp_path_factory.mktemp("features")
    with running_node(root, "features-test", ["bootstrap.metadata.version=7"]) as running:
        yield running


def features(node: RunningNode, *words: str) -> Outcome:
    return replog("features", *words, "--bootstrap-server", node.kafka_address, "--timeout", "20")


def add_alice(node: RunningNode) -> Outcome:
    return replog(
        "configs", "alter", "--entity-type", "users", "--entity-name", "alice",
        "--add-config", SCRAM_ALICE, "--bootstrap-server", node.kafka_address,
    )  # fmt: skip


def described(node: RunningNode) -> dict[str, tuple[str, str, str]]:
    """Each feature's (min, max, finalized) as describe prints them; every line in
    kafka-features.sh's layout."""
    outcome = features(node, "describe")
    assert outcome.returncode == 0, outcome.stderr
    lines = outcome.stdout.splitlines()
    layout = re.compile(
        r"Feature: (\S+) +  SupportedMinVersion: (\S+) +  SupportedMaxVersion: (\S+) +  "
        r"FinalizedVersionLevel: (\S+) +  Epoch: (\d+)"
    )
    found = {}
    for line in lines:
        match = layout.fullmatch(line)
        assert match is not None, line
        assert line.index("SupportedMinVersion") == len("Feature: ") + 40 + 2
        found[match[1]] = (match[2], match[3], match[4])
    return found


def test_an_old_cluster_is_upgraded_and_then_takes_scram_users(node: RunningNode) -> None:
    assert described(node) == {
        "eligible.leader.replicas.version": ("0", "1", "0"),
        "metadata.version": ("3.0-IV1", "3.6-IV0", "3.3-IV3"),
        "transaction.version": ("0", "2", "2"),
    }
    refused = add_alice(node)
    assert refused.returncode == 1
    assert "does not support SCRAM" in refused.stdout + refused.stderr
    elr = features(node, "upgrade", "--feature", "eligible.leader.replicas.version=1")
    assert elr.returncode == 1
    assert elr.stdout.endswith("depends on metadata.version level 12\n"), elr.stdout
    dry = features(node, "upgrade", "--metadata", "3.6-IV0", "--dry-run")
    assert (dry.returncode, dry.stdout) == (
        0,
        " `metadata` flag is deprecated and may be removed in a future release.\n"
        "metadata.version can be upgraded to 12.\n",
    )
    assert described(node)["metadata.version"][2] == "3.3-IV3"
    done = features(node, "upgrade", "--feature", "metadata.version=12")
    assert (done.returncode, done.stdout) == (0, "metadata.version was upgraded to 12.\n")
    wait_until(
        lambda: described(node)["metadata.version"][2] == "3.6-IV0",
        "the broker's ApiVersions finalizing 3.6-IV0",
    )
    added = add_alice(node)
    assert added.returncode == 0, added.stderr
    assert added.stdout == "Completed updating config for user alice.\n"


def test_transaction_version_moves_down_and_back(node: RunningNode) -> None:
    down = features(node, "downgrade", "--feature", "transaction.version=1")
    assert (down.returncode, down.stdout) == (0, "transaction.version was downgraded to 1.\n")
    wait_until(lambda: described(node)["transaction.version"][2] == "1", "transaction.version 1")
    off = features(node, "disable", "--feature", "transaction.version")
    assert (off.returncode, off.stdout) == (0, "transaction.version was disabled.\n")
    wait_until(lambda: described(node)["transaction.version"][2] == "0", "transaction.version off")
    up = features(node, "upgrade", "--feature", "transaction.version=2")
    assert (up.returncode, up.stdout) == (0, "transaction.version was upgraded to 2.\n")
    wait_until(lambda: described(node)["transaction.version"][2] == "2", "transaction.version 2")


def test_eligible_leader_replicas_turn_on_off_and_on_again(node: RunningNode) -> None:
    prefix = "The update failed for all features since the following feature had an error: "
    feature = "eligible.leader.replicas.version"
    for verb, words, done in (
        ("upgrade", ["--feature", f"{feature}=1"], "upgraded to 1"),
        ("disable", ["--feature", feature], "disabled"),
        ("upgrade", ["--feature", f"{feature}=1"], "upgraded to 1"),
    ):
        outcome = features(node, verb, *words)
        assert (outcome.returncode, outcome.stdout) == (0, f"{feature} was {done}.\n")
        level = "0" if verb == "disable" else "1"
        wait_until(lambda level=level: described(node)[feature][2] == level, f"ELR {level}")
    below = features(node, "downgrade", "--metadata", "3.5-IV2", "--dry-run")
    assert below.returncode == 1
    assert below.stdout.splitlines()[1] == (
        f"Can not downgrade metadata.version to 11. {prefix}Invalid update version 11 for "
        f"feature metadata.version. {feature} could not be kept at 1 because it depends on "
        "metadata.version level 12"
    )


def test_refused_changes_say_why_as_kafka_does(node: RunningNode) -> None:
    prefix = "The update failed for all features since the following feature had an error: "
    up = features(node, "upgrade", "--feature", "metadata.version=12")  # its level: no change
    assert up.returncode == 0, up.stdout
    down = features(node, "downgrade", "--metadata", "3.3-IV3")
    assert down.returncode == 1
    assert down.stdout.splitlines()[1] == (
        f"Could not downgrade metadata.version to 7. {prefix}Unsupported metadata.version "
        "downgrade from 12 to 7. Refusing to perform the requested downgrade because it might "
        "delete metadata information."
    )
    assert "1 out of 1 operation(s) failed." in down.stderr
    beyond = features(node, "upgrade", "--feature", "transaction.version=3", "--dry-run")
    assert beyond.returncode == 1
    assert beyond.stdout == (
        f"Can not upgrade transaction.version to 3. {prefix}Invalid update version 3 for "
        "feature transaction.version. Local controller 1 only supports versions 0-2\n"
    )
    assert described(node)["metadata.version"][2] == "3.6-IV0"
    nothing = features(node, "upgrade")
    assert (nothing.returncode, nothing.stderr.strip()) == (
        1,
        "replog features: You must specify at least one feature to upgrade",
    )
