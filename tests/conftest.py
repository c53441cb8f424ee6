"""The test session runs gRPC as replog's own processes do (replog/wire/grpc_engine.py): on its
polling engine, without fork handlers (with them, pyspark's launch of its JVM gateway, a fork
then exec while gRPC calls run, at times killed the child before its exec).

gRPC reads both switches when grpc is first imported, which for this process is while pytest
collects the first test module; this conftest is loaded before any of them.
"""

from __future__ import annotations

import compileall
from pathlib import Path

from replog.wire.grpc_engine import choose_grpc_engine

choose_grpc_engine()


def pytest_sessionstart(session: object) -> None:
    """Compile the project's modules to bytecode once, before any test starts a process.

    Many tests start nodes and CLI commands as processes, each importing most of replog. Where
    PYTHONDONTWRITEBYTECODE is set (this CI machine sets it) no import writes a `.pyc`, so each
    of those processes compiled every module again, ~0.8 s of CPU apiece; with the files
    compiled here (compileall writes them whatever that variable says) every process loads
    them instead. What runs is the same code: a `.pyc` is used only while it matches its
    source file.
    """
    root = Path(__file__).resolve().parent.parent
    for package in ("replog", "quorum", "timeline", "checkpoints"):
        compileall.compile_dir(root / package, quiet=1)
