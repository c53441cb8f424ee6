"""The `replog` subcommands: name, one-line summary and module, in `replog --help` order.

Rules: this module imports nothing of replog's, so `replog --help` lists every command without
loading any; `replog.cli.main` imports only the chosen command's module (a command's module may
load the server runtime, gRPC or Spark). A module's `register(commands)` adds its parser with
`command_help(name)`, so the summary is written once, here.
"""

from __future__ import annotations

from typing import NamedTuple


class Command(NamedTuple):
    name: str
    help: str
    module: str = ""  # its module under replog.cli, which has `register(commands)`; "": the name

    @property
    def module_name(self) -> str:
        return f"replog.cli.{self.module or self.name.replace('-', '_')}"


COMMANDS: tuple[Command, ...] = (
    Command(
        "demo",
        "the main job: a 3-node cluster streams exactly once through a leader's SIGKILL, "
        "then Spark aggregates it",
        "demo_command",
    ),
    Command(
        "storage-demo",
        "crash a writing log with SIGKILL, recover it, and verify every acknowledged write",
    ),
    Command(
        "dump-log",
        "print the batches of a .log segment (or the entries of an index or producer snapshot)",
    ),
    Command(
        "verify-log",
        "check every batch's CRC, offsets and index entries of a stopped node's logs",
    ),
    Command("node", "run one replog node (controller and/or broker) in the foreground"),
    Command("cluster", "start, inspect and stop a local multi-process cluster", "cluster_command"),
    Command("quorum", "describe the metadata quorum (like kafka-metadata-quorum.sh)"),
    Command(
        "features", "describe and change the cluster's feature levels (like kafka-features.sh)"
    ),
    Command("topics", "create, list, describe, alter and delete topics (like kafka-topics.sh)"),
    Command("configs", "describe and alter topic and broker configs (like kafka-configs.sh)"),
    Command(
        "reassign", "move partition replicas between brokers (like kafka-reassign-partitions.sh)"
    ),
    Command(
        "elect-leaders", "run preferred or unclean leader elections (like kafka-leader-election.sh)"
    ),
    Command("delete-records", "delete records before an offset (like kafka-delete-records.sh)"),
    Command("acls", "add, remove and list ACLs (like kafka-acls.sh)"),
    Command(
        "perf", "measure producer and consumer throughput and latency (like kafka-*-perf-test.sh)"
    ),
    Command(
        "produce",
        "send stdin lines as records (like kafka-console-producer.sh)",
        "console_producer",
    ),
    Command("consume", "print records (like kafka-console-consumer.sh)", "console_consumer"),
    Command("log-dirs", "describe the brokers' log dirs (like kafka-log-dirs.sh)"),
    Command(
        "consumer-groups",
        "list consumer groups and describe their members, offsets and lag "
        "(like kafka-consumer-groups.sh)",
    ),
    Command(
        "transactions",
        "list, describe and abort transactions, find hanging ones (like kafka-transactions.sh)",
    ),
    Command(
        "bench",
        "run a benchmark workload against replog and Apache Kafka, report with plots",
    ),
    Command(
        "sim",
        "run seeded simulations of a whole cluster under faults, checking its guarantees",
    ),
)

_BY_NAME = {command.name: command for command in COMMANDS}


def command_help(name: str) -> str:
    """The one-line summary of `replog NAME`."""
    return _BY_NAME[name].help


def find_command(name: str) -> Command | None:
    return _BY_NAME.get(name)
