"""A Python worker's fetch sessions kept from one task for the next (`fetch_sessions`).

The pool, on fake sessions and a clock the test moves: a session given back is taken again for
the same settings only, never after its idle timeout (the pool's thread closes it then), nor
when it is no longer usable; beyond the capacity the oldest is closed; a closed pool closes
what it gets. A child forked from a worker makes its own pool and never uses or closes its
parent's sessions.

`PartitionFetcher` on a real session (its bootstrap never answers): a fetcher closed with
`keep` gives its session back, and the next fetcher takes it and asks the metadata again
first; one with a fetch in flight closes it instead.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

import pytest

from replog.client.records import TopicPartition
from replog.clock import monotonic_ms
from replog.spark import fetch_sessions
from replog.spark.fetch_sessions import SessionPool, settings_key, worker_sessions
from replog.spark.partition_fetcher import PartitionFetcher
from replog.spark.range_reader import READ_DEFAULTS


class _Session:
    def __init__(self, name: str) -> None:
        self.name = name
        self.usable = True
        self.closed = False

    def close(self) -> None:
        self.closed = True
        self.usable = False


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _opener(made: list[_Session]) -> Callable[[], _Session]:
    def open_session() -> _Session:
        made.append(_Session(f"s{len(made)}"))
        return made[-1]

    return open_session


def test_a_session_given_back_is_taken_again_for_the_same_settings_only() -> None:
    pool: SessionPool = SessionPool(capacity=4, idle_timeout_s=60, clock=_Clock())
    made: list[_Session] = []
    first = pool.take("a", _opener(made))
    pool.give_back("a", first)
    assert pool.take("b", _opener(made)) is not first
    assert pool.take("a", _opener(made)) is first
    # Out of the pool while used: a second task with the same settings gets its own.
    assert pool.take("a", _opener(made)) is not first
    assert [s.closed for s in made] == [False, False, False]
    pool.close()


def test_a_session_is_never_taken_after_its_idle_timeout_and_is_closed_then() -> None:
    clock = _Clock()
    pool: SessionPool = SessionPool(capacity=4, idle_timeout_s=60, clock=clock)
    made: list[_Session] = []
    first = pool.take("a", _opener(made))
    pool.give_back("a", first)
    clock.now += 60
    second = pool.take("a", _opener(made))
    assert second is not first and first.closed
    pool.close()

    # With nothing taken: the pool's thread closes it once the timeout passes.
    # 1 s: a loaded machine may run this thread 0.2 s late, and the session must be kept then.
    pool = SessionPool(capacity=4, idle_timeout_s=1.0)
    kept = _Session("kept")
    pool.give_back("a", kept)
    time.sleep(0.05)
    assert not kept.closed and pool.kept() == 1
    deadline = time.monotonic() + 5
    while not kept.closed and time.monotonic() < deadline:
        time.sleep(0.02)
    assert kept.closed and pool.kept() == 0


def test_an_unusable_session_is_neither_kept_nor_taken() -> None:
    pool: SessionPool = SessionPool(capacity=4, idle_timeout_s=60, clock=_Clock())
    made: list[_Session] = []
    broken = _Session("broken")
    broken.usable = False
    pool.give_back("a", broken)
    assert broken.closed and pool.kept() == 0
    # One that became unusable while kept (its loop thread ended) is closed when found.
    kept = _Session("kept")
    pool.give_back("a", kept)
    kept.usable = False
    assert pool.take("a", _opener(made)) is made[0] and kept.closed
    pool.close()


def test_beyond_its_capacity_the_pool_closes_the_oldest_and_a_closed_pool_keeps_nothing() -> None:
    pool: SessionPool = SessionPool(capacity=2, idle_timeout_s=60, clock=_Clock())
    sessions = [_Session(f"s{i}") for i in range(3)]
    for i, session in enumerate(sessions):
        pool.give_back(f"k{i}", session)
    assert [s.closed for s in sessions] == [True, False, False] and pool.kept() == 2
    pool.close()
    assert all(s.closed for s in sessions)
    late = _Session("late")
    pool.give_back("k", late)
    assert late.closed and pool.kept() == 0


def test_a_forked_child_never_uses_or_closes_its_parent_s_sessions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fetch_sessions, "_pool", None)  # this test's own worker pool
    parent_pool = worker_sessions()
    parent_session = _Session("parent's")
    parent_pool.give_back("a", parent_session)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, then leave without running the parent's cleanups
        try:
            child_pool = worker_sessions()
            made: list[_Session] = []
            taken = child_pool.take("a", _opener(made))
            parent_pool.give_back("a", taken)  # a copy: ignored
            parent_pool.close()  # a copy of the parent's: does nothing here
            verdict = (
                child_pool is not parent_pool
                and taken is made[0]
                and not parent_session.closed
                and not taken.closed
            )
            os.write(write_end, b"ok" if verdict else b"bad")
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as answer:
        said = answer.read()
    os.waitpid(pid, 0)
    assert said == b"ok"
    assert worker_sessions() is parent_pool and parent_pool.kept() == 1
    assert not parent_session.closed
    assert parent_pool.take("a", _opener([])) is parent_session
    parent_pool.close()


SETTINGS = {
    **READ_DEFAULTS,
    "bootstrap.servers": "127.0.0.1:1",  # nothing listens: a fetch stays in flight
    "retry.backoff.ms": "20",
}
TP = TopicPartition("t", 0)


def _loop_threads(name: str = "replog-spark-fetch") -> set[threading.Thread]:
    """The sessions' loop threads running now: compared as a set, since a session another test
    left in a pool may end meanwhile."""
    return {t for t in threading.enumerate() if t.name == name and t.is_alive()}


def test_a_fetcher_gives_its_session_back_when_kept_and_the_next_asks_the_metadata_again() -> None:
    pool: SessionPool = SessionPool(capacity=4, idle_timeout_s=60)
    before = _loop_threads()
    first = PartitionFetcher(TP, SETTINGS, pool)
    session = first._session
    first.close(keep=True)
    assert pool.kept() == 1 and session.usable
    updates: list[int] = []
    session.metadata.request_update = lambda: updates.append(1)  # type: ignore[method-assign]
    second = PartitionFetcher(TopicPartition("t", 1), SETTINGS, pool)
    assert second._session is session and pool.kept() == 0
    session.loop.run(_nothing(), timeout_s=5, what="sync")  # begin_task's call has run
    assert updates == [1]
    # Other settings: another session.
    other = PartitionFetcher(TP, {**SETTINGS, "client.id": "other"}, pool)
    assert other._session is not session
    other.close()
    # A fetch in flight (no broker answers): closed, not kept.
    deadline = monotonic_ms() + 60_000
    pending = second.submit(0, deadline)
    second.close(keep=True)
    assert pool.kept() == 0 and not session.usable and pending.done()
    assert not _loop_threads() - before  # this test's sessions all ended
    pool.close()


async def _nothing() -> None:
    pass


def test_settings_key_tells_settings_apart_not_their_order() -> None:
    assert settings_key({"a": 1, "b": "2"}) == settings_key({"b": 2, "a": "1"})
    assert settings_key({"a": 1}) != settings_key({"a": 2})
