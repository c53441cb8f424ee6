"""How many of this process's descriptors a test's files hold (Linux `/proc/self/fd`)."""

from __future__ import annotations

import gc
import os
import time
from pathlib import Path

from replog.storage import write_hints

# How long descriptors that are on their way to being closed may take (on a loaded machine).
SETTLE_S = 2.0


def files_open_under(directory: Path, *, collect: bool = True) -> list[str]:
    """The files under `directory` that this process holds descriptors of, one entry per
    descriptor (none where there is no `/proc/self/fd`).

    Found by where they point, not from the process's total: a test worker runs many tests,
    and threads some of them leave behind open and close descriptors of their own at any
    moment. With `collect`, garbage is collected first: an earlier test's garbage (a file
    region) closes its descriptor then."""
    if not os.path.isdir("/proc/self/fd"):
        return []
    if collect:
        gc.collect()
    prefix = str(directory.resolve()) + os.sep
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since the listing
            continue
        if target.startswith(prefix):
            found.append(target[len(prefix) :])
    return found


def descriptors_under(directory: Path) -> int:
    """How many of this process's open descriptors name a file under `directory` (Linux)."""
    return len(files_open_under(directory))


def files_left_under(directory: Path) -> list[str]:
    """`files_open_under(directory)` once what closes descriptors on its own has run: garbage
    collected (a file region), the write-hint thread's queue done (a queued hint holds a copy
    of its file's descriptor), polled for up to `SETTLE_S`."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        runner = write_hints.runner
        if isinstance(runner, write_hints.HintThread):
            runner.wait_idle(max(0.0, deadline - time.monotonic()))
        left = files_open_under(directory)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)
