"""The `replog` command: one entry point, a subcommand per task, `--help` on each.

Rules: a user mistake (bad path, corrupt file, bad flag) prints one clear line on stderr and
exits non-zero; tracebacks are for bugs only (`REPLOG_DEBUG=1` shows them for any error).
Only the chosen command's module is imported (`replog.cli.commands` lists them): `replog --help`
and the client tools start without the server runtime, gRPC's server side or Spark.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
from collections.abc import Collection, Sequence

# Before any other of replog's modules: their dataclasses are made from kept code from here on.
from replog.cli import dataclass_methods

dataclass_methods.install()

from replog import __version__  # noqa: E402
from replog.cli.commands import COMMANDS, find_command  # noqa: E402
from replog.errors import ReplogError  # noqa: E402


def build_parser(load: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The `replog` parser. Only the commands named in `load` (every command when None) get
    their full parser, which imports their module; the others are listed by name and summary,
    so `replog --help` or one command loads no other command's dependencies."""
    parser = argparse.ArgumentParser(
        prog="replog",
        description="replog: an embeddable replicated log with Kafka's format and guarantees.",
    )
    parser.add_argument("--version", action="version", version=f"replog {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        if load is None or command.name in load:
            importlib.import_module(command.module_name).register(commands)
        else:
            commands.add_parser(command.name, help=command.help)
    return parser


def chosen_command(argv: Sequence[str]) -> str | None:
    """The command `argv` names: its first word that is not an option (the top-level options
    take no value), if that is a command."""
    for word in argv:
        if not word.startswith("-"):
            return word if find_command(word) else None
    return None


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
    words = sys.argv[1:] if argv is None else list(argv)
    chosen = chosen_command(words)
    parser = build_parser(load=() if chosen is None else (chosen,))
    args, unknown = parser.parse_known_args(words)
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
