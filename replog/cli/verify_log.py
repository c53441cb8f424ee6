"""`replog verify-log DIR [--json]`: check every segment of a stopped node's partition logs.

DIR is a log dir (one of a node's `log.dirs`: every partition directory in it is checked,
the metadata log's too) or one partition directory. For each segment: every batch's CRC-32C
and framing, offsets ascending and contiguous from the segment's base offset (and from the
segment before it), and the entries of its `.index` (offsets and positions ascending, each
pointing at the start of the batch holding its offset, or of a multi-batch append whose last
offset it is, as older replog versions indexed) and `.timeindex` (timestamps and offsets
never decreasing, inside the segment). Each problem is one line naming the file, the byte
position and the offset where known, and what is wrong; a summary line ends the output.
`--json` prints one document instead (`problems`, each with `file`, `position`, `offset`,
`problem`; `clean`; counts).

A compacted partition's segments hold what the log cleaner left: batches with fewer records
than offsets, and gaps between batches and between segments. Those are not damage for a
partition the log dir's `cleaner-offset-checkpoint` lists (the cleaner has cleaned it), nor
for any partition with `--compacted`; overlaps and every other check still apply. A
checkpoint file that does not read is a problem of its own.

Exit code 0 only when nothing is wrong, 1 otherwise. Nothing is written: run it on a stopped
node (a running one may be appending to its last segment). A batch damaged below the recovery
point is served by its leader and refused by followers (CORRUPT_MESSAGE, the
"replog_follower_corrupt_fetch_total" metric); this finds it, and docs/operations.md says what
to do next.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field
from typing import Any

from replog.cli.arguments import add_documented_command
from replog.cli.segment_checks import (
    Problem,
    base_offset_of,
    index_problems,
    offset_index_entries,
    time_index_entries,
    walk_segment,
)
from replog.errors import CorruptCheckpointError, ReplogError
from replog.storage.cleaner.cleaner_checkpoint import CleanerCheckpoint


def register(commands: Any) -> None:
    parser = add_documented_command(commands, "verify-log", __doc__)
    parser.add_argument("directory", metavar="DIR", help="a log dir, or one partition directory")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--compacted",
        action="store_true",
        help="allow the log cleaner's gaps and sparse batches in every partition",
    )
    parser.set_defaults(run=run)


@dataclass(slots=True)
class Verification:
    partitions: int = 0
    segments: int = 0
    batches: int = 0
    problems: list[Problem] = field(default_factory=list)


def run(args: argparse.Namespace) -> int:
    found = verify_directory(args.directory, compacted=args.compacted)
    if args.json:
        print(
            json.dumps(
                {
                    "directory": args.directory,
                    "partitions": found.partitions,
                    "segments": found.segments,
                    "batches": found.batches,
                    "clean": not found.problems,
                    "problems": [p.to_json() for p in found.problems],
                },
                indent=2,
            )
        )
    else:
        for problem in found.problems:
            print(problem.line())
        counted = "no problems" if not found.problems else f"{len(found.problems)} problem(s)"
        print(
            f"Checked {found.partitions} partition(s), {found.segments} segment(s), "
            f"{found.batches} batch(es) in {args.directory}: {counted}"
        )
    return 1 if found.problems else 0


def verify_directory(directory: str, *, compacted: bool = False) -> Verification:
    """Check DIR as a partition directory if it holds segments, else each partition directory
    in it (module docstring); `compacted`: every partition may have been cleaned."""
    if not os.path.isdir(directory):
        raise ReplogError(f"{directory}: not a directory")
    found = Verification()
    if _segments(directory):
        log_dir = os.path.dirname(os.path.abspath(directory))
        partitions = [directory]
    else:
        log_dir = directory
        partitions = sorted(
            path
            for path in (os.path.join(directory, name) for name in os.listdir(directory))
            if os.path.isdir(path) and _segments(path)
        )
    if not partitions:
        raise ReplogError(
            f"{directory}: holds no segment (.log) files and no partition directory with any"
        )
    cleaned = _cleaned_partitions(log_dir, found)
    for partition in partitions:
        _verify_partition(partition, found, compacted or os.path.basename(partition) in cleaned)
    return found


def _cleaned_partitions(log_dir: str, found: Verification) -> set[str]:
    """The directory names ("topic-partition") of the partitions the log dir's
    `cleaner-offset-checkpoint` lists; a file that does not read is a problem, and lists none."""
    checkpoint = CleanerCheckpoint(log_dir)
    try:
        entries = checkpoint.read()
    except CorruptCheckpointError as exc:
        found.problems.append(Problem(checkpoint.path, 0, None, str(exc)))
        return set()
    return {f"{topic}-{partition}" for topic, partition in entries}


def _segments(directory: str) -> list[tuple[int, str]]:
    """(base offset, path) of every `.log` segment in `directory`, by base offset."""
    segments = []
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        base = base_offset_of(name)
        if name.endswith(".log") and base is not None and os.path.isfile(path):
            segments.append((base, path))
    return sorted(segments)


def _verify_partition(directory: str, found: Verification, compacted: bool) -> None:
    found.partitions += 1
    previous_end: int | None = None
    for base_offset, log_path in _segments(directory):
        found.segments += 1
        if (
            previous_end is not None
            and base_offset != previous_end
            and not (compacted and base_offset > previous_end)
        ):
            found.problems.append(
                Problem(
                    log_path,
                    0,
                    base_offset,
                    f"the segment starts at offset {base_offset}, but the one before it ends at "
                    f"offset {previous_end - 1}",
                )
            )
        batches = walk_segment(log_path, base_offset, compacted=compacted)
        found.batches += len(batches.starts)
        found.problems.extend(batches.problems)
        stem = log_path.removesuffix(".log")
        index_path, time_index_path = stem + ".index", stem + ".timeindex"
        log_size = os.path.getsize(log_path)
        if os.path.isfile(index_path):
            entries = offset_index_entries(_read(index_path), base_offset, log_size)
            found.problems.extend(index_problems(index_path, entries, batches, offset_index=True))
        if os.path.isfile(time_index_path):
            entries = time_index_entries(_read(time_index_path), base_offset, batches.next_offset)
            found.problems.extend(
                index_problems(time_index_path, entries, batches, offset_index=False)
            )
        previous_end = batches.next_offset


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()
