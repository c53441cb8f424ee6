"""A log manager given a seeded `random.Random` makes the same random choices every time (the
id in a deleted or stray partition's directory name, each segment's roll jitter), so that a
simulation's seed replays them; without one they differ between managers. A log given one
rolls at the same offsets every time."""

from __future__ import annotations

import dataclasses
import random

from storage_helpers import make_batch

from replog.storage.log import Log
from replog.storage.log_config import LogConfig
from replog.storage.log_manager import LogManager
from replog.storage.memory_fs import MemoryFileSystem

T0 = 1_700_000_000_000
CONFIG = LogConfig(segment_ms=60_000, segment_jitter_ms=50_000)


def choices(rng: random.Random | None) -> tuple[list[str], list[int]]:
    """The renamed directories and roll jitters of one run of the same operations."""
    fs = MemoryFileSystem(clock=lambda: T0)
    manager = LogManager("/data", CONFIG, fs=fs, clock=lambda: T0, rng=rng)
    jitters = []
    for partition in range(3):
        log = manager.get_or_create_log("orders", partition)
        jitters.append(log._roll_jitter_ms)
        log.roll()
        jitters.append(log._roll_jitter_ms)
        manager.delete_log("orders", partition)
    renamed = sorted(name for name in fs.list_dir("/data") if name.endswith("-delete"))
    manager.shutdown()
    return renamed, jitters


def test_the_same_seed_makes_the_same_choices() -> None:
    renamed, jitters = choices(random.Random(7))
    assert len(renamed) == 3 and all(name.startswith("orders-") for name in renamed)
    assert all(0 <= jitter < 50_000 for jitter in jitters)
    assert choices(random.Random(7)) == (renamed, jitters)
    assert choices(random.Random(8)) != (renamed, jitters)


def test_without_a_generator_the_choices_differ() -> None:
    first, second = choices(None), choices(None)
    assert first[0] != second[0]


def roll_bases(seed: int) -> list[int]:
    """The base offsets of the segments a log seeded with `seed` has after the same appends,
    one a second of record time for 10 minutes (segment.ms 60 s, jitter up to 50 s)."""
    # Small index files: the log keeps its ~20 segments in memory.
    config = dataclasses.replace(CONFIG, segment_index_bytes=4096)
    log = Log.open("/t-0", config, fs=MemoryFileSystem(clock=lambda: T0), rng=random.Random(seed))
    for second in range(600):
        log.append_as_leader(make_batch(timestamp=T0 + second * 1000), leader_epoch=0)
    bases = [segment.base_offset for segment in log.segments()]
    log.close()
    return bases


def test_two_logs_seeded_alike_roll_alike() -> None:
    bases = roll_bases(7)
    # Without jitter a segment would hold 61 seconds: the draws shortened some.
    assert len(bases) > 600 // 61 + 1
    assert roll_bases(7) == bases
    assert roll_bases(8) != bases
