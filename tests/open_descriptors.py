"""How many of this process's descriptors a test's files hold (Linux `/proc/self/fd`)."""

from __future__ import annotations

import gc
import os
from pathlib import Path


def descriptors_under(directory: Path) -> int:
    """How many of this process's open descriptors name a file under `directory` (Linux).

    Counted by where they point, not as the process's total: a test worker runs many tests, and
    threads some of them leave behind open and close descriptors of their own at any moment."""
    gc.collect()  # an earlier test's garbage (a file region) closes its descriptor now
    prefix = str(directory.resolve()) + os.sep
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since the listing
            continue
        count += target.startswith(prefix)
    return count
