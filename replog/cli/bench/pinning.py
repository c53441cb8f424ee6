"""CPU pinning for `replog bench --server-cpus LIST --driver-cpus LIST`: the systems' server
processes on some cores, the driver processes on others, so that each system gets the same
cores and the clients do not compete with the servers for them.

Lists are taskset's (`0`, `0,2`, `1-3`). Server processes started by a script or a program
(Apache Kafka's JVMs, nats-server) run under `taskset -c LIST`; replog's nodes are spawned
from this process while its spawning thread is pinned (`pinned`), which a child inherits just
as it would under taskset. Every thread a pinned process starts inherits its set.

Rules: a list that is not taskset's syntax, or names a CPU this process may not run on, is a
`BenchSystemError` naming it (checked before any system starts).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from replog.errors import BenchSystemError


def parse_cpus(text: str) -> list[int]:
    """The CPUs a taskset-style list names ("0", "0,2", "1-3"); ValueError if malformed."""
    cpus: list[int] = []
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise ValueError(f"{text!r}: expected CPU numbers and ranges, e.g. 0 or 0,2-3")
        first, last = int(low), int(high or low)
        if last < first:
            raise ValueError(f"{text!r}: the range {part.strip()} runs backwards")
        cpus.extend(range(first, last + 1))
    return sorted(set(cpus))


def check_cpus(text: str | None, what: str) -> str | None:
    """`text` if it names CPUs this process may use (None stays None); else BenchSystemError."""
    if text is None:
        return None
    try:
        cpus = parse_cpus(text)
    except ValueError as exc:
        raise BenchSystemError(f"{what}: {exc}") from None
    usable = os.sched_getaffinity(0)
    outside = [c for c in cpus if c not in usable]
    if outside:
        raise BenchSystemError(
            f"{what} {text}: CPU {outside[0]} is not one this process may use "
            f"({', '.join(map(str, sorted(usable)))})"
        )
    return text


def taskset(cpus: str | None) -> list[str]:
    """The command prefix that runs a program on `cpus` (nothing when None)."""
    return ["taskset", "-c", cpus] if cpus else []


@contextlib.contextmanager
def pinned(cpus: str | None) -> Iterator[None]:
    """Pin the calling thread to `cpus` while in the block (children spawned in it inherit
    the set), then restore its set."""
    if not cpus:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, parse_cpus(cpus))
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
