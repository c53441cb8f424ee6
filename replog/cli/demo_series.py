"""The once-a-second figures of `replog demo`: acknowledgements per second and URP over time.

Pure: the demo takes a `Sample` every second (acknowledged sends so far, the number of
under-replicated partitions, what happened in that second) and this module turns the samples
into the progress line printed at once and the compact table printed at the end.

Rules:
- A rate is the acknowledgements between two samples divided by the time between them (the
  samples are not exactly one second apart), rounded to a whole number.
- URP is None when the admin request failed in that second (shown as `?`).
- The table is the series transposed (one column per sample, rows `t (s)`, `acks/s`, `URP`),
  folded into chunks that fit `width` characters, so a minute of samples takes a few lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Sample:
    elapsed_s: float  # since the stream started
    acknowledged: int  # sends acknowledged so far
    failed: int  # sends failed so far
    urp: int | None  # under-replicated partitions; None: unknown
    note: str = ""  # what the demo did in this second (kill, restart, ...)


def rate(previous: Sample | None, current: Sample) -> int:
    """Acknowledgements per second since `previous` (since the start if None)."""
    before_s, before_n = (0.0, 0)
    if previous is not None:
        before_s, before_n = previous.elapsed_s, previous.acknowledged
    interval_s = current.elapsed_s - before_s
    if interval_s <= 0:
        return 0
    return round((current.acknowledged - before_n) / interval_s)


def progress_line(previous: Sample | None, current: Sample) -> str:
    urp = "?" if current.urp is None else str(current.urp)
    line = (
        f"  t={current.elapsed_s:5.1f}s  acked {current.acknowledged:>8,}  "
        f"{rate(previous, current):>6,} acks/s  failed {current.failed}  URP {urp}"
    )
    return f"{line}  <- {current.note}" if current.note else line


def series_table(samples: Sequence[Sample], width: int = 100) -> list[str]:
    """The series as a folded, transposed table (module rules); notes are listed below it."""
    if not samples:
        return ["(no samples)"]
    columns = []
    previous: Sample | None = None
    for sample in samples:
        mark = "*" if sample.note else ""
        columns.append(
            (
                f"{sample.elapsed_s:.0f}{mark}",
                str(rate(previous, sample)),
                "?" if sample.urp is None else str(sample.urp),
            )
        )
        previous = sample
    labels = ("t (s)", "acks/s", "URP")
    label_width = max(map(len, labels))
    chunks: list[list[tuple[str, str, str]]] = [[]]
    used = label_width
    for column in columns:
        cell = max(map(len, column)) + 1
        if chunks[-1] and used + cell > width:
            chunks.append([])
            used = label_width
        chunks[-1].append(column)
        used += cell
    lines: list[str] = []
    for chunk in chunks:
        if lines:
            lines.append("")
        cells = [max(map(len, c)) + 1 for c in chunk]
        for row, label in enumerate(labels):
            body = "".join(c[row].rjust(w) for c, w in zip(chunk, cells, strict=True))
            lines.append(label.ljust(label_width) + body)
    notes = [f"  * t={s.elapsed_s:.0f}s: {s.note}" for s in samples if s.note]
    return lines + (["", *notes] if notes else [])
