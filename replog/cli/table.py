"""Plain-text tables, as the `replog` commands print them (`quorum describe --replication`,
`cluster status`, `log-dirs describe`, `consumer-groups describe`).

Rules: imports nothing, so any command's parser may use it without loading what the command
runs.
"""

from __future__ import annotations

from collections.abc import Sequence


def print_table(lines: Sequence[Sequence[str]]) -> None:
    """Left-aligned columns two spaces apart; the first line is the header."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    for line in lines:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
