"""The Spark source's decode of one fetch answer, alone: `decode_batches` and the Arrow batch.

What a Spark task does per fetch answer beside the fetch itself (`replog.spark.range_reader`):
the answer's batches are walked and checked (`answer_batches`, CRC-32C), decoded to columns
(`replog.spark.batch_columns.decode_batches`) and made into the Arrow record batch Spark gets
(`columns_to_record_batch`). This bench builds a realistic answer in memory and times those
steps, the working tree's decoder and Arrow batch against the baseline's (`batch_columns.py` and
`arrow.py` loaded from git, `--base`, main by default; `--base numpy`: the working tree's own
numpy decoder, its compiled one turned off) in the same process, alternating, so both see the
same machine load. The working tree's side keeps one partition's
`ConstantColumns` over its answers, as a task does.

The answer (defaults): about 8 MiB (`--answer-mib`; the source fetches 8 MiB per partition) of
batches of `--batch-records` records, each a 100-byte random value (`--value-bytes`) and one of
100 keys `key-00`..`key-99`, timestamps growing over `--batch-ms` milliseconds within a batch,
so record sizes change within a batch as the offset and timestamp deltas' varints grow. The
defaults are what a cluster answers `bench/spark_read.py`'s reads with (`bench/
spark_fetch_path.py`'s cluster, captured): batches of 700-3,500 records, 2,000 typical, and
records 3 ms apart (the data set's timestamps grow by 1 ms a record, round-robin over 3
partitions), so timestamp deltas of 2 bytes from record 22 and 3 from record 2,731: heads
of 16 bytes and more up to the value (`batch_columns._Layout`). `--batch-ms 50` (deltas of one
byte) decodes about 15 ns a row faster than these.
`--varied` gives values of random sizes (0 to 2x `--value-bytes`) instead.

Prints, per side, CPU ns per row as min / median / max of `--passes` passes (each pass decodes the
answer `--repeat` times), and new / base per pass pair. Both sides' columns are checked equal
first.

    .venv/bin/python bench/batch_decode.py
    .venv/bin/python bench/batch_decode.py --varied --passes 9
    .venv/bin/python bench/batch_decode.py --base 7da4a65
    .venv/bin/python bench/batch_decode.py --base numpy --no-arrow   # compiled / numpy
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from types import ModuleType

import numpy as np
import pyarrow as pa
from base_commit import build_extensions

from replog.client.answer_batches import answer_batches
from replog.record import build_batch
from replog.spark import batch_columns
from replog.spark.arrow import ConstantColumns, columns_to_record_batch
from replog.spark.worker_allocator import keep_freed_memory

ROOT = Path(__file__).resolve().parent.parent
NUMPY = "numpy"  # --base: the working tree's numpy decoder, its compiled one turned off
SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us")),
        ("timestampType", pa.int32()),
    ]
)


def build_answer(args: argparse.Namespace) -> bytes:
    """Batches back to back, as a fetch answer's records field holds them."""
    rng = random.Random(56)
    pieces: list[bytes] = []
    size = 0
    offset = 0
    now = 1_700_000_000_000
    while size < args.answer_mib << 20:
        records = []
        for i in range(args.batch_records):
            length = rng.randrange(2 * args.value_bytes + 1) if args.varied else args.value_bytes
            stamp = now + i * args.batch_ms // args.batch_records
            records.append((stamp, b"key-%02d" % ((offset + i) % 100), rng.randbytes(length), ()))
        batch = build_batch(records, base_offset=offset)
        pieces.append(batch)
        size += len(batch)
        offset += args.batch_records
        now += args.batch_ms
    return b"".join(pieces)


def load_base(commit: str, name: str = "batch_columns") -> ModuleType:
    """`replog/spark/<name>.py` as it is at `commit`, as a module of its own, with that
    commit's compiled decoder if it has one (`base_compiled`); `numpy`: the working tree's,
    with its compiled decoder turned off (`batch_columns.DECODER`)."""
    if commit == NUMPY:
        source = (ROOT / "replog" / "spark" / f"{name}.py").read_bytes()
    else:
        source = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{commit}:replog/spark/{name}.py"],
            check=True,
            capture_output=True,
        ).stdout
    path = Path(tempfile.mkdtemp()) / f"base_{name}.py"
    path.write_bytes(source)
    spec = importlib.util.spec_from_file_location(f"base_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[f"base_{name}"] = module
    spec.loader.exec_module(module)
    if commit == NUMPY and name == "batch_columns":
        module._compiled = None
        module.DECODER = "numpy"
    elif name == "batch_columns" and getattr(module, "_compiled", None) is not None:
        # The base's own compiled decoder, not the working tree's it imported.
        module._compiled = base_compiled(commit, path.parent)
        module.DECODER = "numpy" if module._compiled is None else "compiled"
    return module


def base_compiled(commit: str, directory: Path) -> ModuleType | None:
    """`replog/spark/_batch_decode.c` as it is at `commit`, built in `directory` by that
    commit's setup.py (`base_commit.build_extensions`) and loaded as a module of its own;
    None if the commit has none."""
    c_source = "replog/spark/_batch_decode.c"
    found = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, c_source], capture_output=True
    )
    if found.returncode != 0:
        return None
    subprocess.run(["tar", "-x", "-C", str(directory)], input=found.stdout, check=True)
    build_extensions(commit, str(directory))
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    built = directory / "replog" / "spark" / f"_batch_decode{suffix}"
    spec = importlib.util.spec_from_file_location("_batch_decode", built)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def one_pass(
    decoder: ModuleType, data: bytes, repeat: int, arrow: bool, to_batch: ModuleType | None = None
) -> float:
    """CPU seconds of this process for `repeat` decodes of the whole answer (walk and CRC,
    columns, Arrow batch): CPU time, not wall time, so other work on the machine that takes
    the core away is not counted (its cache and memory traffic still is). `to_batch`: the
    base's `replog.spark.arrow` (one batch built alone); else the working tree's, with one
    partition's `ConstantColumns` kept over the `repeat` answers, as a task keeps it."""
    constants = ConstantColumns("t", 0)
    started = time.process_time()
    for _ in range(repeat):
        batches = [
            (p, h)
            for p, h in answer_batches(
                data, 0, 1 << 62, check_crcs=True, name="bench", where="bench"
            )
            if not h.is_control
        ]
        columns = decoder.decode_batches(memoryview(data), batches, where="bench")
        if arrow and to_batch is not None:
            to_batch.columns_to_record_batch("t", 0, columns, SCHEMA)
        elif arrow:
            columns_to_record_batch("t", 0, columns, SCHEMA, constants)
    return time.process_time() - started


def micros(columns: batch_columns.BatchColumns) -> np.ndarray:
    """The columns' timestamps in microseconds: an older base's columns hold milliseconds."""
    if hasattr(columns, "timestamps_us"):
        return columns.timestamps_us
    return columns.timestamps * 1000  # type: ignore[attr-defined]


def spread(values: list[float]) -> str:
    return f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--base",
        default="main",
        help="the baseline decoder's commit, or `numpy`: the working tree's numpy decoder",
    )
    parser.add_argument("--answer-mib", type=int, default=8)
    parser.add_argument("--batch-records", type=int, default=2000)
    parser.add_argument("--batch-ms", type=int, default=6000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--varied", action="store_true", help="values of random sizes")
    parser.add_argument("--passes", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-arrow", action="store_true", help="leave the Arrow batch out")
    args = parser.parse_args()
    keep_freed_memory()  # as a Spark worker does (replog.spark.worker_allocator)
    data = build_answer(args)
    base = load_base(args.base)
    base_arrow = load_base(args.base, "arrow")
    batches = list(answer_batches(data, 0, 1 << 62, check_crcs=True, name="b", where="b"))
    rows = sum(h.records_count for _, h in batches)
    new_columns = batch_columns.decode_batches(memoryview(data), batches, where="bench")
    base_columns = base.decode_batches(memoryview(data), batches, where="bench")
    for name in ("offsets", "timestamp_types"):
        assert (getattr(new_columns, name) == getattr(base_columns, name)).all(), name
    assert (micros(new_columns) == micros(base_columns)).all()
    assert new_columns.keys.equals(base_columns.keys)
    assert new_columns.values.equals(base_columns.values)
    print(
        f"answer: {len(data) / 2**20:.1f} MiB, {len(batches)} batches, {rows:,} rows; "
        f"base {args.base}; new decoder {batch_columns.DECODER}; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    timed: dict[str, list[float]] = {"base": [], "new": []}
    sides = (("base", base, base_arrow), ("new", batch_columns, None))
    for _, decoder, to_batch in sides:  # warm up
        one_pass(decoder, data, 1, not args.no_arrow, to_batch)
    for _ in range(args.passes):
        for name, decoder, to_batch in sides:
            seconds = one_pass(decoder, data, args.repeat, not args.no_arrow, to_batch)
            timed[name].append(seconds / (args.repeat * rows) * 1e9)
    ratios = [n / b for n, b in zip(timed["new"], timed["base"], strict=True)]
    what = "walk + CRC + decode" if args.no_arrow else "walk + CRC + decode + Arrow batch"
    print(f"{what}, ns per row, min / median / max of {args.passes} passes:")
    print(f"  base {spread(timed['base'])}")
    print(f"  new  {spread(timed['new'])}")
    print(
        f"  new / base {min(ratios):.2f} / {statistics.median(ratios):.2f} / {max(ratios):.2f}"
        f"; load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
