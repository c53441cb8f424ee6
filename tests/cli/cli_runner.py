"""Running the `replog` command from a test: in this process (fast) or as a user does.

In-process runs go through the same `main` as the `replog` script, with stdout and stderr
captured and stdin replaced; argparse's exits (usage errors: 2, `--help`: 0) become the
return code. A subprocess costs seconds of imports on a busy machine, so only tests that need
a real process (signals, exit codes as the shell sees them) use `replog_process`.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from dataclasses import dataclass
from unittest import mock

from replog.cli.main import main


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str


def replog(*args: str, stdin: str = "") -> Outcome:
    """`replog ARGS` in this process, with `stdin` as its standard input."""
    raw_out = io.BytesIO()
    out = io.TextIOWrapper(raw_out, encoding="utf-8", write_through=True)
    err = io.StringIO()
    with (
        mock.patch.object(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode()))),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            code = main(list(args))
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    out.flush()
    return Outcome(code, raw_out.getvalue().decode(), err.getvalue())


def replog_process(
    *args: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`replog ARGS` as a user runs it: a subprocess; never raises on a non-zero exit."""
    return subprocess.run(
        [sys.executable, "-m", "replog.cli.main", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
