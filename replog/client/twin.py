"""One pattern for the blocking twins of the asyncio clients (Producer, Consumer, Admin).

A blocking client owns its asyncio twin (`_aio`) and a `LoopThread`, and declares each method
it forwards once, from the asyncio method: `awaited(AioClass.method)` for a coroutine (run on
the loop thread and waited for within the call's `timeout_ms`), `on_loop(AioClass.method)` for a
method of local state (called on the loop thread, so it never races the engine),
`in_caller(AioClass.method)` for one that any thread may call. The blocking
method gets the asyncio method's name, signature and docstring; the blocking class supplies
`_run(coro, what, timeout_ms)` and `_call(what, fn, *args, **kwargs)`, its own waits and errors.

What a blocking client does differently on purpose (the producer's hot path appends in the
caller's thread, kafka-python's seconds for `flush`/`close`, futures a thread can wait on) is
hand-written and listed in `DIFFERENCES`; tests/client/test_twins.py checks that the public
methods and signatures of each pair differ by exactly that.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class BlockingTwin(Protocol):
    """What a forwarded method needs of its blocking class."""

    _aio: Any

    def _run(self, coro: Coroutine[Any, Any, T], what: str, timeout_ms: int | None) -> T: ...

    def _call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...


def awaited(
    method: Callable[Concatenate[Any, P], Coroutine[Any, Any, T]],
    *,
    what: str | None = None,
    convert: Mapping[str, Callable[[Any], Any]] | None = None,
) -> Callable[Concatenate[Any, P], T]:
    """The blocking twin of coroutine method `method`: runs it on the loop thread and waits
    within its `timeout_ms` argument (None when it has none or was not given). `convert`
    maps argument names to what the caller's thread makes of them first (an iterator drained
    there); `what` names the call in errors (default: the method's name)."""
    name = method.__name__
    signature = inspect.signature(method)
    takes_timeout = "timeout_ms" in signature.parameters

    def blocking(self: BlockingTwin, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        for key, change in (convert or {}).items():
            if key in bound.arguments:
                bound.arguments[key] = change(bound.arguments[key])
        timeout_ms = bound.arguments.get("timeout_ms") if takes_timeout else None
        coro = getattr(self._aio, name)(*bound.args[1:], **bound.kwargs)
        return self._run(coro, what or name, timeout_ms)

    return _named(blocking, method, signature)


def on_loop(
    method: Callable[Concatenate[Any, P], T],
    *,
    convert: Mapping[str, Callable[[Any], Any]] | None = None,
) -> Callable[Concatenate[Any, P], T]:
    """The blocking twin of plain method `method`: called on the loop thread (`awaited`)."""
    name = method.__name__
    signature = inspect.signature(method)

    def blocking(self: BlockingTwin, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        for key, change in (convert or {}).items():
            if key in bound.arguments:
                bound.arguments[key] = change(bound.arguments[key])
        return self._call(name, getattr(self._aio, name), *bound.args[1:], **bound.kwargs)

    return _named(blocking, method, signature)


def in_caller(method: Callable[Concatenate[Any, P], T]) -> Callable[Concatenate[Any, P], T]:
    """The blocking twin of plain method `method` that is safe from any thread (a snapshot of
    counters): called in the caller's thread, also from a callback on the loop thread."""
    name = method.__name__

    def blocking(self: BlockingTwin, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._aio, name)(*args, **kwargs)

    return _named(blocking, method, inspect.signature(method))


def _named(
    blocking: Callable[..., Any], method: Callable[..., Any], signature: inspect.Signature
) -> Callable[..., Any]:
    blocking.__name__ = method.__name__
    blocking.__qualname__ = method.__qualname__
    blocking.__doc__ = method.__doc__
    blocking.__signature__ = signature  # type: ignore[attr-defined]
    return blocking


# (blocking class, method): why it differs from the asyncio twin. A method only one side has
# is listed with its side; a method both have with a different signature, as "signature".
DIFFERENCES: dict[tuple[str, str], str] = {
    ("Producer", "send"): "signature: returns a FutureRecordMetadata (kafka-python), appended "
    "in the caller's thread",
    ("Producer", "flush"): "signature: timeout in seconds, as kafka-python's",
    ("Producer", "close"): "signature: timeout in seconds, as kafka-python's",
    ("Producer", "send_nowait"): "asyncio only: the blocking send does not wait either",
    ("Producer", "start"): "asyncio only: the blocking producer starts in its constructor",
    ("Producer", "undelivered"): "asyncio only: the blocking producer's exit hook reads it",
    ("Consumer", "commit_async"): "signature: a concurrent.futures.Future a thread can wait on",
    ("Consumer", "start"): "asyncio only: the blocking consumer learns metadata at its first call",
    ("Consumer", "next_record"): "asyncio only: the blocking consumer iterates with __next__",
    ("Consumer", "iteration_buffer"): "asyncio only: what the blocking iteration reads from",
    ("Admin", "close"): "signature: the blocking close bounds its wait with timeout_ms",
}
