"""How long a log cleaner's swap holds the log's lock: the time appends, fetches and the high
watermark of that partition wait for each cleaned segment swapped in (issue #78, "never stalls
produce beyond noise").

One compacted log as `bench/cleaner_produce.py`'s `load` topic has it (`segment.bytes` 256 KiB,
`index.interval.bytes` 4096, batches of 25 records of 200 bytes over 5,000 keys), on the disk
of `--data-dir`: filled to `--segments` segments, then `--passes` times one cleaning pass
(`clean_log`, on this thread) over everything below the active segment, followed by a
segment's worth of new batches. Every `Log.replace_with_cleaned` call (a swap: one or more
cleaned groups at once) is timed twice: the time the log's lock is held in it (the lock is
wrapped for that call only; a call that takes it more than once counts the sum) and the
whole call.
Nothing else runs in the process, so the figures are the swap's own work and the disk's.

`--compare-checkout DIR` runs the same measurement with the code of DIR (another version, e.g.
a checkout of the main branch) in a child process, alternating with this one's per round.

    .venv/bin/python bench/cleaner_swap.py [--passes 40] [--segments 5] [--rounds 3]
        [--data-dir DIR] [--compare-checkout DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

_BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
_OWN_SOURCE = os.path.dirname(_BENCH_DIR)

VALUE = b"v" * 200
KEYS = 5000
BATCH_RECORDS = 25
SEGMENT_BYTES = 256 * 1024


class _TimedLock:
    """The log's lock, timing each outermost hold while `timing` is set."""

    def __init__(self, inner: Any, holds: list[float]) -> None:
        self._inner = inner
        self._holds = holds
        self._depth = 0
        self._since = 0.0
        self.timing = False

    def __enter__(self) -> bool:
        entered: bool = self._inner.__enter__()
        self._depth += 1
        if self._depth == 1:
            self._since = time.perf_counter()
        return entered

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0 and self.timing:
            self._holds.append(time.perf_counter() - self._since)
        self._inner.__exit__(*exc)

    def acquire(self, *args: Any, **kwargs: Any) -> bool:
        return bool(self._inner.acquire(*args, **kwargs))

    def release(self) -> None:
        self._inner.release()


def measure(data_dir: str, passes: int, segments: int) -> dict[str, Any]:
    """Per swap: the lock's hold and the whole call, in ms (module docstring)."""
    from replog.record.builder import build_batch
    from replog.storage import Log, LogConfig
    from replog.storage.cleaner.log_cleaning import clean_log
    from replog.storage.cleaner.offset_map import OffsetMap

    config = LogConfig(segment_bytes=SEGMENT_BYTES, cleanup_policy="compact")
    log = Log.open(os.path.join(data_dir, "load-0"), config)
    holds: list[float] = []
    calls: list[float] = []
    lock = _TimedLock(log._lock, holds)
    log._lock = lock  # type: ignore[assignment]
    replace: Callable[..., Any] = log.replace_with_cleaned

    def timed_replace(*args: Any, **kwargs: Any) -> Any:
        lock.timing = True
        held_before = len(holds)
        began = time.perf_counter()
        try:
            return replace(*args, **kwargs)
        finally:
            calls.append(time.perf_counter() - began)
            lock.timing = False
            # One figure a swap: the sum of its holds (a swap may take the lock more than once).
            holds[held_before:] = [sum(holds[held_before:])]

    log.replace_with_cleaned = timed_replace  # type: ignore[method-assign]
    written = 0

    def append_segment() -> None:
        nonlocal written
        start = log.active_segment.base_offset
        while log.active_segment.base_offset == start:
            now = int(time.time() * 1000)
            records = [
                (now, f"key-{(written + i) % KEYS}".encode(), VALUE, ())
                for i in range(BATCH_RECORDS)
            ]
            log.append_as_leader(build_batch(records), 0)
            written += BATCH_RECORDS
        log.high_watermark = log.log_end_offset

    for _ in range(segments):
        append_segment()
    offset_map = OffsetMap(24 * 2 * KEYS)
    first_dirty = 0
    groups = 0
    for _ in range(passes):
        result = clean_log(
            log,
            offset_map,
            first_dirty=first_dirty,
            first_uncleanable=log.active_segment.base_offset,
            now_ms=int(time.time() * 1000),
            delete_retention_ms=86_400_000,
        )
        first_dirty = result.end_offset
        groups += result.groups_swapped
        append_segment()
    log.close()
    return {
        "swaps": len(calls),
        "groups": groups,
        "lock_held_ms": [h * 1e3 for h in holds],
        "call_ms": [c * 1e3 for c in calls],
    }


def summary(values: Sequence[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[int(len(ordered) * 0.9) - 1] if len(ordered) >= 10 else ordered[-1]
    return (
        f"min {ordered[0]:.2f} / median {statistics.median(ordered):.2f} / "
        f"p90 {p90:.2f} / max {ordered[-1]:.2f} ms"
    )


def run_child(checkout: str, args: argparse.Namespace, data_dir: str) -> dict[str, Any]:
    """`measure` with the code of `checkout`, in a child process."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [checkout, env.get("PYTHONPATH")]))
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        "--passes",
        str(args.passes),
        "--segments",
        str(args.segments),
        "--data-dir",
        data_dir,
    ]
    done = subprocess.run(command, env=env, cwd=checkout, capture_output=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=40)
    parser.add_argument("--segments", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data-dir")
    parser.add_argument("--compare-checkout", metavar="DIR")
    parser.add_argument("--json")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # the code on PYTHONPATH, one measurement, as JSON on stdout
        print(json.dumps(measure(args.data_dir, args.passes, args.segments)))
        return
    versions = {"this checkout": _OWN_SOURCE}
    if args.compare_checkout:
        other = os.path.abspath(args.compare_checkout)
        versions[os.path.basename(other)] = other
    results: dict[str, dict[str, list[float]]] = {
        name: {"lock_held_ms": [], "call_ms": []} for name in versions
    }
    base = args.data_dir or tempfile.gettempdir()
    for round_ in range(args.rounds):
        names = list(versions)
        if round_ % 2:
            names.reverse()
        for name in names:
            with tempfile.TemporaryDirectory(prefix="cleaner-swap-", dir=base) as scratch:
                one = run_child(versions[name], args, scratch)
            for key in ("lock_held_ms", "call_ms"):
                results[name][key] += one[key]
            print(
                f"round {round_ + 1} {name}: {one['swaps']} swaps ({one.get('groups')} groups), "
                f"lock held "
                f"{summary(one['lock_held_ms'])}",
                flush=True,
            )
    print(f"\nper swap, {args.rounds} rounds of {args.passes} passes, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip
    for name, figures in results.items():
        print(f"{name}: lock held {summary(figures['lock_held_ms'])}")
        print(f"{' ' * len(name)}  whole call {summary(figures['call_ms'])}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
