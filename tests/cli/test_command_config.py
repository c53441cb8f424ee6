"""`--command-config FILE` is on every `replog` command that talks to a cluster (from the shared
argument layer), and a bad file is a usage error naming the file and the key, before anything
connects."""

from __future__ import annotations

import argparse
from pathlib import Path

from cli_runner import replog

from replog.cli.main import build_parser

# Every command (and action) that builds a client of a cluster.
CLUSTER_CLIENTS = [
    "topics create", "topics list", "topics describe", "topics alter", "topics delete",
    "produce", "consume", "configs describe", "configs alter", "reassign generate",
    "reassign execute", "reassign verify", "reassign cancel", "reassign list", "elect-leaders",
    "delete-records", "log-dirs describe", "consumer-groups", "transactions list",
    "transactions describe", "transactions describe-producers", "transactions abort",
    "transactions find-hanging", "quorum describe", "perf produce", "perf consume",
]  # fmt: skip


def parser_of(words: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for word in words.split():
        (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = sub.choices[word]
    return parser


def test_every_cluster_client_command_takes_a_command_config() -> None:
    missing = [
        words
        for words in CLUSTER_CLIENTS
        if "--command-config" not in parser_of(words)._option_string_actions
    ]
    assert missing == []


def test_a_bad_command_config_is_a_usage_error_naming_file_and_key(tmp_path: Path) -> None:
    absent = tmp_path / "absent.properties"
    outcome = replog("topics", "list", "--command-config", str(absent))
    assert outcome.returncode == 2
    assert f"argument --command-config: {absent}: cannot read it" in outcome.stderr
    typo = tmp_path / "typo.properties"
    typo.write_text("security.protocol=SSL\nssl.ca.locaton=/ca.pem\n")
    outcome = replog("produce", "--topic", "t", "--command-config", str(typo))
    assert outcome.returncode == 2
    assert (
        f"argument --command-config: {typo}: unknown client config 'ssl.ca.locaton'; did you "
        "mean 'ssl.ca.location'?"
    ) in outcome.stderr
    sasl = tmp_path / "sasl.properties"
    sasl.write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n")
    outcome = replog("consumer-groups", "--list", "--command-config", str(sasl))
    assert outcome.returncode == 2, outcome.stderr
    assert "sasl.username: required with security.protocol=SASL_SSL" in outcome.stderr


def test_a_missing_tls_file_is_named_when_the_command_builds_its_client(tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text(
        "bootstrap.servers=127.0.0.1:1\nsecurity.protocol=SSL\n"
        f"ssl.ca.location={tmp_path / 'gone.pem'}\n"
    )
    outcome = replog("topics", "list", "--command-config", str(config))
    assert outcome.returncode == 1
    assert f"ssl.ca.location={tmp_path / 'gone.pem'}: cannot load" in outcome.stderr
