"""`replog node --config FILE`: run one node process in the foreground."""

from __future__ import annotations

import argparse
import gc
import logging
import sys
from typing import Any

from replog.cli import dataclass_methods
from replog.cli.commands import command_help
from replog.config import parse_properties

log = logging.getLogger("replog.server")


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "node",
        help=command_help("node"),
        description=(
            "Run one replog node from a Kafka-style properties file (process.roles, node.id, "
            "controller.quorum.voters, listeners, log.dirs). SIGTERM shuts it down gracefully."
        ),
    )
    parser.add_argument("--config", required=True, metavar="FILE", help="server.properties file")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    # The node's runtime (gRPC, storage, the controller) is imported here, when it runs:
    # `replog node --help` loads none of it. Its modules make some 70,000 objects that live as
    # long as the process: the collector's passes over them while they load find nothing
    # (about a tenth of the imports' CPU), so it waits until they are in.
    gc.disable()
    import asyncio

    from replog.server.config.node_config import NodeConfig
    from replog.server.data_plane.file_maker import make_new_log_files_in_a_process
    from replog.server.process.known_properties import unknown_properties
    from replog.server.process.node import Node
    from replog.server.runtime.allocator import keep_large_buffers
    from replog.server.runtime.bulk_threads import share_the_gil_promptly, start_bulk_threads
    from replog.server.runtime.collector import freeze_startup_objects, install_growth_freezer
    from replog.server.runtime.loop_collections import install_loop_collections
    from replog.server.runtime.loop_collections import stop as stop_loop_collections
    from replog.server.runtime.loop_stall_monitor import sample_stalls_with_the_process_timer
    from replog.server.runtime.open_files import raise_open_file_limit
    from replog.storage.cleaner.cleaning_process import clean_logs_in_processes
    from replog.wire.grpc_engine import engine_description

    # Keep the imports' dataclass methods now, not only at exit: a node may end by kill -9.
    dataclass_methods.save()
    gc.enable()
    with open(args.config, encoding="utf-8") as f:
        properties = parse_properties(f.read(), source=args.config)
    config = NodeConfig.from_properties(properties)
    # A server's log is read after the fact: INFO (role changes, ISR changes, lifecycle), as
    # Kafka's server.log; `-v` adds DEBUG.
    logging.getLogger().setLevel(logging.DEBUG if args.verbose else logging.INFO)
    for message in unknown_properties(properties):
        log.warning("%s: %s", args.config, message)
    log.info("%s", engine_description())
    log.info("open-file limit: %s", raise_open_file_limit() or "none")
    # A node process owns its allocator: keep batch-sized buffers off mmap (allocator.py).
    keep_large_buffers()
    # Before the loop runs, which would otherwise wait for each bulk thread's start
    # (bulk_threads.py).
    start_bulk_threads()
    # The loop takes the GIL back from a bulk thread within half a millisecond (bulk_threads.py).
    share_the_gil_promptly()
    log.info("GIL switch interval: %g ms", sys.getswitchinterval() * 1000)
    # A large round's new logs' files are made by a child process at idle priority, which
    # shares no GIL with the loop (replog/storage/file_maker_process.py).
    make_new_log_files_in_a_process()
    # The log cleaner's passes run in child processes at a lower priority, which share no
    # GIL with the loop (replog/storage/cleaner/cleaning_process.py).
    clean_logs_in_processes()
    # The loop's stalls are sampled by a timer it re-arms, not a thread (loop_stall_monitor.py).
    sample_stalls_with_the_process_timer()

    async def main() -> int:
        # gRPC's aio server and the driver's queue belong to the loop they are created in.
        node = Node(config)
        # What start-up built lives as long as the process, and so do replicas once created:
        # keep them out of full collections, which otherwise stall the loop (collector.py).
        freeze_startup_objects()
        install_growth_freezer()
        # No collection in a thread that may be preempted holding the GIL (loop_collections.py).
        install_loop_collections()
        try:
            return await node.serve()
        finally:
            stop_loop_collections()

    return asyncio.run(main())
