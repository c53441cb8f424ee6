"""The event loop an asyncio client (Producer, Consumer, Admin) lives on.

A client creates tasks, futures, events and gRPC channels on the loop it is first used on, and
asyncio ties each of them to that loop. Used from another loop (a second `asyncio.run`, a thread
with its own loop), asyncio would fail deep inside: "attached to a different loop", "bound to a
different event loop", "Event loop is closed". So a client binds to
the running loop of its first coroutine call, and every later call made on a running loop
checks it:

- another running loop is an IllegalStateError that says to make one client per event loop (or
  use the blocking client, which any thread may use);
- a call with no running loop (the plain setters such as a consumer's `assign`) is not checked:
  it creates nothing on a loop;
- a plain (not async) method never binds, it only compares: a blocking client builds its
  asyncio engine in the caller's thread, which in a notebook runs the kernel's event loop, and
  the engine's home is the blocking client's private loop, where its coroutines run (binding at
  the constructor's `subscribe` made every later call fail);
- a client whose loop has ended (`ended`: the `asyncio.run` that used it returned) can still be
  closed, which then only marks it closed: nothing of it can run any more.
"""

from __future__ import annotations

import asyncio

from replog.errors import IllegalStateError


class EventLoopBinding:
    """The loop of one client; `client` and `blocking` name it and its blocking counterpart in
    the error (e.g. "asyncio Consumer", "replog.Consumer")."""

    def __init__(self, client: str, blocking: str) -> None:
        self._client = client
        self._blocking = blocking
        self.loop: asyncio.AbstractEventLoop | None = None

    def check(self, *, bind: bool = True) -> None:
        """Check that the running loop is the bound one, binding it first if none is and
        `bind` (a coroutine call); no running loop: no check."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            return
        if bind or self.loop is not None:
            self._check(running)

    def bind_running(self, what: str) -> asyncio.AbstractEventLoop:
        """The bound loop, binding it now; `what` needs a running loop (RuntimeError without
        one, naming the blocking client)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                f"{what}: the {self._client} needs a running event loop (use {self._blocking} "
                "for blocking code)"
            ) from None
        self._check(running)
        return running

    @property
    def ended(self) -> bool:
        """Whether the bound loop is closed (never bound: False)."""
        return self.loop is not None and self.loop.is_closed()

    def ended_for_close(self) -> bool:
        """For `close`: True when the bound loop has ended, so that closing only marks the
        client closed; otherwise the running loop is checked (and bound) as for any call."""
        if self.ended:
            return True
        self.check()
        return False

    def _check(self, running: asyncio.AbstractEventLoop) -> None:
        if self.loop is None:
            self.loop = running
        elif running is not self.loop:
            raise IllegalStateError(
                f"this {self._client} runs on the event loop it was first used on, not this "
                f"one: create one per event loop (or use {self._blocking}, which any thread "
                "may use)"
            )
