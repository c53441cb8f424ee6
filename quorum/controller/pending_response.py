"""PendingResponse: the answer to one controller write, available once its records commit.

The controller returns one from every write. The shell turns it into whatever its callers
wait on (an asyncio future, a gRPC reply) through `add_done_callback`; tests read `done`,
`result()` and `error` directly.

Rules:
- It settles exactly once: with a response (its records committed) or with an error (the
  request was invalid, or the controller lost leadership before the commit: NOT_CONTROLLER).
- `result()` before it settles is a bug in the caller and raises `RuntimeError`; after a
  failure it raises the error.
- Callbacks run synchronously, on the controller's single thread, when it settles (or at once
  if it already has), in the order added. They must not raise: they run inside a controller
  event, which they must not break.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

R = TypeVar("R")


class PendingResponse(Generic[R]):
    """A write's response, or its error, once known."""

    __slots__ = ("_callbacks", "_done", "_error", "_response", "description")

    def __init__(self, description: str) -> None:
        # What the write was, for messages and debugging ("register broker 3").
        self.description = description
        self._done = False
        self._response: R | None = None
        self._error: Exception | None = None
        self._callbacks: list[Callable[[PendingResponse[R]], None]] = []

    def __repr__(self) -> str:
        if not self._done:
            state = "pending"
        elif self._error is not None:
            state = f"failed: {self._error!r}"
        else:
            state = f"done: {self._response!r}"
        return f"PendingResponse({self.description!r}, {state})"

    @property
    def done(self) -> bool:
        return self._done

    @property
    def error(self) -> Exception | None:
        """The error it failed with, or None (pending, or succeeded)."""
        return self._error

    def result(self) -> R:
        """The response; raises the error if the write failed."""
        if not self._done:
            raise RuntimeError(f"the response to {self.description} is not known yet")
        if self._error is not None:
            raise self._error
        return self._response  # type: ignore[return-value]  # set whenever done without error

    def add_done_callback(self, callback: Callable[[PendingResponse[R]], None]) -> None:
        """Call `callback(self)` once settled (now, if it already is)."""
        if self._done:
            callback(self)
        else:
            self._callbacks.append(callback)

    # -- the controller's side ----------------------------------------------------------------

    def succeed(self, response: R) -> None:
        """Settle with `response`."""
        self._settle(response, None)

    def fail(self, error: Exception) -> None:
        """Settle with `error`."""
        self._settle(None, error)

    def _settle(self, response: R | None, error: Exception | None) -> None:
        if self._done:
            raise RuntimeError(f"the response to {self.description} was already settled: {self}")
        self._done = True
        self._response = response
        self._error = error
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)
