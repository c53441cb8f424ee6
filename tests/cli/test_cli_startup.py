"""Start-up cost of the `replog` command: `replog --help` and the client tools import only what
they run, never the server runtime, the storage engine or Spark (each `replog` call paid
0.65-0.8 s for them). Checked structurally, by the modules loaded in a fresh interpreter, so the
check holds however busy the machine is; docs/operations.md ("Start-up time") has the timings."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from replog.cli.commands import COMMANDS
from replog.cli.main import build_parser
from tests.local_ports import free_port

ROOT = Path(__file__).resolve().parents[2]

# What no client tool needs: the node's runtime and storage, the controller, Spark.
SERVER_SIDE = (
    "replog.server",
    "replog.storage",
    "replog.replication",
    "replog.quorum",
    "replog.timeline",
)
SPARK = ("pyspark", "pyarrow", "replog.spark")
# What only running a command that connects needs: gRPC and the generated messages.
RPC = ("grpc", "google.protobuf", "replog.pb")


def modules_loaded_by(*argv: str) -> list[str]:
    """The modules a fresh interpreter has loaded once `replog ARGV` returned."""
    return run_in_a_fresh_interpreter(*argv)[2]


def run_in_a_fresh_interpreter(*argv: str) -> tuple[int, str, list[str]]:
    """`replog ARGV` in a fresh interpreter: its exit code, what it printed on stdout, and the
    modules loaded once it returned."""
    probe = (
        "import json, sys\n"
        "from replog.cli.main import main\n"
        "try:\n"
        "    code = main(sys.argv[1:])\n"
        "except SystemExit as exit_:\n"
        "    code = exit_.code if isinstance(exit_.code, int) else 1\n"
        "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    *output, last = result.stdout.splitlines()
    answer = json.loads(last)
    return answer["code"], "\n".join(output), answer["modules"]


def under(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)]


def test_help_loads_no_command_module_nor_grpc() -> None:
    loaded = modules_loaded_by("--help")
    assert under(loaded, ("grpc", "google.protobuf", *SERVER_SIDE, *SPARK)) == []
    commands = {c.module_name for c in COMMANDS}
    assert sorted(commands & set(loaded)) == []


def test_a_commands_help_loads_no_grpc() -> None:
    """Building `topics`' parser imports neither gRPC nor the generated messages: only running
    a subcommand connects."""
    loaded = modules_loaded_by("topics", "list", "--help")
    assert under(loaded, ("grpc", "google.protobuf", "replog.pb", "replog.admin")) == []


@pytest.mark.parametrize("command", [c.name for c in COMMANDS])
def test_every_commands_help_loads_neither_grpc_nor_the_server(command: str) -> None:
    """`replog COMMAND --help` builds the command's whole parser (every action's) and loads
    no gRPC, no generated message, no node runtime and no Spark: what a command runs is
    imported when it runs. The offline tools (`dump-log`, `verify-log`, `storage-demo`) may
    load the storage engine they are about."""
    loaded = modules_loaded_by(command, "--help")
    heavy = (
        "grpc",
        "google.protobuf",
        "replog.pb",
        "replog.server",
        "replog.quorum",
        "replog.timeline",
    )
    assert under(loaded, (*heavy, *SPARK)) == []


def test_topics_list_loads_only_the_metadata_it_reads() -> None:
    """`replog topics list` loads the Kafka connection and what its Metadata answer is read
    into, not the results of the other admin calls (`kafka_answers`, `controller_results`),
    nor gRPC or protobuf, nor the client library (each is start-up time for nothing). A
    refused address: the command gets as far as its call, then fails fast."""
    loaded = modules_loaded_by(
        "topics", "list", "--bootstrap-server", f"127.0.0.1:{free_port()}", "--timeout", "0.5"
    )
    assert {
        "replog.wire.kafka_connection",
        "replog.admin.kafka_cluster_answers",
        "replog.admin.cluster_metadata",
    } <= set(loaded)
    unused = (
        "replog.admin.kafka_answers",
        "replog.admin.controller_results",  # topic changes, configs, elections, reassignments
        "replog.admin.quorum",
        "grpc",
        "google.protobuf",
        "replog.pb",
        "replog.client",
        "replog.record",
    )
    assert under(loaded, unused) == []


@pytest.mark.parametrize(
    "argv",
    [
        # A refused address and a short timeout: the command fails fast, after its imports.
        ["topics", "list", "--bootstrap-server", "REFUSED", "--timeout", "0.5"],
        ["produce", "--topic", "t", "--help"],
        ["consume", "--help"],
    ],
)
def test_client_tools_load_neither_the_server_nor_spark(argv: list[str]) -> None:
    refused = f"127.0.0.1:{free_port()}"
    loaded = modules_loaded_by(*(refused if word == "REFUSED" else word for word in argv))
    assert under(loaded, (*SERVER_SIDE, *SPARK)) == []


def test_every_command_is_listed_and_loads_its_own_parser() -> None:
    """The summary `replog --help` lists without importing a command is the one the command's
    full parser carries, and every listed command has a module that registers it."""
    listed = summaries(build_parser())
    assert listed == {c.name: c.help for c in COMMANDS}
    assert summaries(build_parser(load=())) == listed


def summaries(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    """Command name -> the summary `replog --help` prints for it."""
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {action.dest: action.help for action in commands._choices_actions}
