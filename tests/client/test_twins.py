"""The blocking and asyncio clients are twins: the same public methods with the same
signatures (modulo `async`), except the differences `replog.client.twin.DIFFERENCES` lists
with their reasons."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from replog import Admin, Consumer, Producer, aio
from replog.client.twin import DIFFERENCES

PAIRS = [(Producer, aio.Producer), (Consumer, aio.Consumer), (Admin, aio.Admin)]
# The protocols each side speaks in its own way: `with` and `for` against `async with` and
# `async for`.
PROTOCOLS = {"__enter__", "__exit__", "__iter__", "__next__"}
AIO_PROTOCOLS = {"__aenter__", "__aexit__", "__aiter__", "__anext__"}


def public(cls: type, protocols: set[str]) -> dict[str, Any]:
    return {
        name: inspect.getattr_static(cls, name)
        for name in dir(cls)
        if not name.startswith("_") or name in protocols
    }


def signature(member: Any) -> str | None:
    if isinstance(member, property):
        return "property"
    if not callable(member):
        return None
    return str(inspect.signature(member))


@pytest.mark.parametrize(("blocking", "asyncio"), PAIRS, ids=lambda cls: cls.__module__)
def test_the_blocking_and_asyncio_clients_expose_the_same_methods(
    blocking: type, asyncio: type
) -> None:
    name = blocking.__name__
    blocking_side = public(blocking, PROTOCOLS)
    asyncio_side = public(asyncio, AIO_PROTOCOLS)
    found: set[tuple[str, str]] = set()
    for method in (set(blocking_side) ^ set(asyncio_side)) - PROTOCOLS - AIO_PROTOCOLS:
        found.add((name, method))
    for method in set(blocking_side) & set(asyncio_side):
        ours, theirs = blocking_side[method], asyncio_side[method]
        if signature(ours) != signature(theirs):
            found.add((name, method))
        elif callable(theirs) and not isinstance(theirs, property):
            # The coroutine side's methods are awaited; the blocking side's never.
            assert not inspect.iscoroutinefunction(ours), f"{name}.{method} is async"
    declared = {key for key in DIFFERENCES if key[0] == name}
    assert found == declared
    assert PROTOCOLS & set(blocking_side) >= {"__enter__", "__exit__"}
    assert AIO_PROTOCOLS & set(asyncio_side) >= {"__aenter__", "__aexit__"}


def test_a_forwarded_method_keeps_the_asyncio_docstring() -> None:
    assert Admin.create_topics.__doc__ == aio.Admin.create_topics.__doc__
    assert Consumer.poll.__doc__ == aio.Consumer.poll.__doc__
