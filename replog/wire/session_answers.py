"""What a fetcher checks of an answer in a KIP-227 fetch session before it trusts it: every
partition it carries is one of the session's, named once, and no offset of a partition without
an error is below -1 ("none"). The answer may leave any of the session's partitions out (the
leader answers news only, in bounded rounds: `replication.fetch_session`).

Rules: the check costs the partitions the answer carries, not the session's size. A failed
check is the caller's `malformed(what)` error, naming what was wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from replog.replication import messages as m

FETCH_OFFSETS = ("high_watermark", "log_start_offset")


def offset_problem(result: Any, offsets: tuple[str, ...]) -> str | None:
    """What is wrong with `result`'s named `offsets` (one below -1 beside no error), or None."""
    if result.error is None:
        for name in offsets:
            value = getattr(result, name)
            if value < m.NO_OFFSET:
                return (
                    f"{name} {value} for {result.topic}-{result.partition} beside no error "
                    "(never below -1)"
                )
    return None


def checked_session_answer(
    response: m.FetchResponse,
    holds: Callable[[tuple[str, int]], bool],
    malformed: Callable[[str], Exception],
) -> m.FetchResponse:
    """`response`, checked against the session's partitions (`holds`); raises `malformed(what)`."""
    seen: set[tuple[str, int]] = set()
    for result in response.partitions:
        key = (result.topic, result.partition)
        if key in seen:
            raise malformed(f"partition {key[0]}-{key[1]} twice")
        if not holds(key):
            raise malformed(f"a partition it did not ask for: {key[0]}-{key[1]}")
        seen.add(key)
        problem = offset_problem(result, FETCH_OFFSETS)
        if problem is not None:
            raise malformed(problem)
    return response
