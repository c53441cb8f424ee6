"""bench/cleaner_throughput.py: the plain copy reads every sealed byte and leaves the log's
directory as it was; the cleaner's side cleans up to the active segment, in several passes
when the buffer holds fewer keys than the dirty section, to the same batches as one pass."""

from __future__ import annotations

import os
from pathlib import Path

from bench_script import load_bench_script

load_bench_script("base_commit.py", "base_commit")  # the scripts' imports, by path as they are
load_bench_script("cleaner_pass.py", "cleaner_pass")
throughput = load_bench_script("cleaner_throughput.py", "bench_cleaner_throughput")


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def _batches(directory: Path) -> bytes:
    """The log's segments' bytes end to end: its batches, whatever the segments' bounds."""
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


def _template(directory: Path, rounds: int, dirty_segments: int) -> dict[str, int]:
    offsets: dict[str, int] = throughput.build_template(
        str(directory), 10, False, rounds, dirty_segments, value_bytes=200, keys=2_000
    )
    return offsets


def test_the_plain_copy_reads_every_sealed_byte_and_leaves_the_directory_as_it_was(
    tmp_path: Path,
) -> None:
    offsets = _template(tmp_path, rounds=2, dirty_segments=2)
    before = _files(tmp_path)
    sealed = throughput.sealed_paths(str(tmp_path), offsets["first_uncleanable"])
    groups = throughput.copy_groups(sealed, offsets["first_uncleanable"])
    assert len(sealed) >= 3 and [p for g in groups for p in g] == sealed
    assert len(groups) < len(sealed)  # the cleaned section's segments share a group

    figures = throughput.plain_copy(str(tmp_path), offsets["first_uncleanable"])

    assert figures["bytes"] == sum(os.path.getsize(p) for p in sealed)
    assert figures["seconds"] > 0
    assert _files(tmp_path) == before


def test_a_small_buffer_cleans_in_several_passes_to_the_batches_of_one(tmp_path: Path) -> None:
    one, several = tmp_path / "one", tmp_path / "several"
    offsets = _template(one, rounds=0, dirty_segments=3)
    _template(several, rounds=0, dirty_segments=3)
    first_dirty, first_uncleanable = offsets["first_dirty"], offsets["first_uncleanable"]
    sealed_bytes = sum(
        os.path.getsize(p) for p in throughput.sealed_paths(str(one), first_uncleanable)
    )
    log_bytes = len(_batches(one))

    large = throughput.cleaner_passes(str(one), first_dirty, first_uncleanable, 128 << 20)
    # 600 slots, 540 keys a pass, against 2,000 keys in the dirty section
    small = throughput.cleaner_passes(str(several), first_dirty, first_uncleanable, 600 * 24)

    assert (large["passes"], large["bytes"]) == (1, sealed_bytes)
    assert small["passes"] >= 4
    assert small["bytes"] > sealed_bytes  # later passes reread what earlier ones cleaned
    assert _batches(one) == _batches(several)
    assert len(_batches(one)) < log_bytes  # the superseded records went
    for figures in (large, small):
        assert figures["peak_extra"] >= 0 and figures["resident_before"] > 0
