"""What tests open through their helpers and may leave open, closed after each test.

A log holds a descriptor per non-empty segment until it is closed, and one test process runs
thousands of tests: a CI worker reached 1,462 open descriptors this way, most of them logs that the
tests' brokers (`tests/server/data_plane/test_replica_manager.Node`) and storage helpers opened and
nothing closed. Helpers register a close with `close_after_test`; `tests/conftest.py` calls them
after every test, newest first. A close that fails is ignored: what it releases is all it is for,
and the test's outcome is decided. After them, a test that still holds a descriptor of a file in its
`tmp_path` fails: counted by where descriptors point, so what other tests' threads open meanwhile
never counts."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

_closes: list[Callable[[], object]] = []


def close_after_test(close: Callable[[], object]) -> None:
    """Call `close` after the running test (idempotent closes only: the test may close too)."""
    _closes.append(close)


def close_leftovers() -> None:
    while _closes:
        with contextlib.suppress(Exception):
            _closes.pop()()
