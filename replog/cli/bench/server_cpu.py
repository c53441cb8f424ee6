"""The CPU the systems' server processes use during a run, read from /proc (Linux).

`cpu_seconds(pids)` gives each running process's user + system CPU seconds so far (all its
threads); `cores_between(before, after, seconds)` the cores they used between two readings,
counting only the processes in both (a node killed or restarted in between is left out, not
counted as negative). The figure is what `replog bench` sets beside the driver processes' CPU:
the cost of serving the workload, e.g. of idle partitions beside a busy topic.

Rules: a process that has gone (or a /proc this machine lacks) is left out of a reading,
never an error: the figure is then of fewer processes, and the result lists how many.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pids: Iterable[int]) -> dict[int, float]:
    """{pid: user + system CPU seconds} of the processes that still run."""
    found = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as f:
                text = f.read()
        except OSError:
            continue
        # The command name (field 2) may hold spaces: the fields after it follow its ")".
        fields = text[text.rindex(")") + 2 :].split()
        found[pid] = (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime
    return found


def cores_between(before: Mapping[int, float], after: Mapping[int, float], seconds: float) -> float:
    """Cores the processes read both times used in between."""
    if seconds <= 0:
        return 0.0
    return sum(after[pid] - before[pid] for pid in before.keys() & after.keys()) / seconds
