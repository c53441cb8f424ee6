"""`counted(work, counter)`: a coroutine that runs `work` and adds one to `counter.steps` each
time the loop resumes it, so that a checker can skip what did not run since it last looked
(the Raft driver's task is the only code that changes its core's state).

Rules: the wrapper changes nothing else: values sent, exceptions thrown in (a cancellation)
and the result pass through unchanged, and closing it closes `work`.
"""

from __future__ import annotations

import types
from collections.abc import Coroutine, Generator
from typing import Any, Protocol, TypeVar

__all__ = ["StepCounter", "counted"]

T = TypeVar("T")


class StepCounter(Protocol):
    steps: int


@types.coroutine
def _counted(work: Coroutine[Any, Any, T], counter: StepCounter) -> Generator[Any, Any, T]:
    inner = work.__await__()
    sent: Any = None
    thrown: BaseException | None = None
    while True:
        counter.steps += 1
        try:
            if thrown is None:
                awaited = inner.send(sent)
            else:
                awaited, thrown = inner.throw(thrown), None
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            sent = yield awaited
        except GeneratorExit:
            inner.close()
            raise
        except BaseException as error:  # a cancellation, or what the awaited future raised
            sent, thrown = None, error


async def counted(work: Coroutine[Any, Any, T], counter: StepCounter) -> T:
    """`work`, each of its resumptions counted (module docstring)."""
    return await _counted(work, counter)
