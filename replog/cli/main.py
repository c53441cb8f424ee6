"""The `replog` command: one entry point, a subcommand per task, `--help` on each.

Rules: a user mistake (bad path, corrupt file, bad flag) prints one clear line on stderr and
exits non-zero; tracebacks are for bugs only (`REPLOG_DEBUG=1` shows them for any error).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Sequence

from replog import __version__
from replog.errors import ReplogError


def build_parser() -> argparse.ArgumentParser:
    from replog.cli import (
        cluster,
        configs,
        console_consumer,
        console_producer,
        delete_records,
        demo,
        dump_log,
        elect_leaders,
        log_dirs,
        node,
        perf,
        quorum,
        reassign,
        storage_demo,
        topics,
        verify_log,
    )

    parser = argparse.ArgumentParser(
        prog="replog",
        description="replog: an embeddable replicated log with Kafka's format and guarantees.",
    )
    parser.add_argument("--version", action="version", version=f"replog {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    demo.register(commands)
    storage_demo.register(commands)
    dump_log.register(commands)
    verify_log.register(commands)
    node.register(commands)
    cluster.register(commands)
    quorum.register(commands)
    topics.register(commands)
    configs.register(commands)
    reassign.register(commands)
    elect_leaders.register(commands)
    delete_records.register(commands)
    perf.register(commands)
    console_producer.register(commands)
    console_consumer.register(commands)
    log_dirs.register(commands)
    return parser


def innermost(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)parser of the command and action `args` were parsed for."""
    while True:
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subparsers:
            return parser
        chosen = getattr(args, subparsers[0].dest, None)
        if chosen not in subparsers[0].choices:
            return parser
        parser = subparsers[0].choices[chosen]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # argparse would name them with the top-level usage; the command's own is the help.
        innermost(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        code: int = args.run(args)
        return code
    except BrokenPipeError:
        # The reader went away (`replog dump-log ... | head`): stop quietly, as a shell tool
        # killed by SIGPIPE would, and keep the interpreter's final flush from failing again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except (ReplogError, OSError) as exc:
        if os.environ.get("REPLOG_DEBUG"):
            raise
        print(f"replog {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"replog {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
