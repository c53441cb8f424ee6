"""`LoopThread`: the private event loop a blocking client runs its asyncio engine on.

The client library's engine (metadata, sender, fetcher, admin calls) is asyncio on Kafka's wire;
each blocking Producer, Consumer or Admin owns one `LoopThread` and runs its coroutines there,
so a script or a Spark executor never sees an event loop.

Rules:
- One daemon thread per client, started by the constructor: a client that is never closed does
  not keep the interpreter alive.
- `run` is the only way a user's thread waits on the loop. It waits in 0.1 s slices so that
  Ctrl-C (KeyboardInterrupt, raised in the waiting thread) is seen within a slice even where a
  lock wait would not be interrupted; on Ctrl-C or on its timeout it cancels the coroutine, so
  nothing keeps running on the user's behalf. Exceptions of the coroutine propagate unchanged.
- `run` from the loop thread itself would wait for itself forever: it raises IllegalStateError
  at once (a callback that calls a blocking method of its own client).
- `call_in_waiter` (from the loop) runs a function in the user's thread that waits in `run`
  (the consumer's rebalance callbacks run in the thread that called poll, as Kafka's do, so
  they may call the client's blocking methods); the waiting thread runs it between its wait
  slices, at once when it is posted. With no thread waiting it runs when one next waits.
- `close` cancels what still runs on the loop, lets it finish, closes the loop and joins the
  thread; idempotent, and safe from any thread (from the loop thread it only stops the loop).
- A client never closed is closed that way when the interpreter exits (an `atexit` hook that
  holds the thread weakly and is removed by `close`): otherwise the daemon thread is frozen with
  its tasks pending, and Python prints "Task was destroyed but it is pending!" for each.
- Once closed, the loop drops what gRPC still hands it (`ClientLoop`): gRPC's asyncio layer
  shares one completion queue among every loop of the process, and any live loop it wakes
  passes each completion to its call's loop with `call_soon_threadsafe`. The completions of
  calls cancelled at the close (a closed channel's) may come after the loop closed; asyncio
  would raise "RuntimeError: Event loop is closed" in the live loop, which prints a traceback
  and leaves that loop's own completions queued until the next one comes. Nobody waits on a
  closed loop, so dropping them loses nothing. Any other callback still raises as asyncio does.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import logging
import os
import queue
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar, TypeVarTuple

from replog.clock import monotonic_ms
from replog.errors import ClientClosedError, IllegalStateError, KafkaTimeoutError

log = logging.getLogger("replog.client")

T = TypeVar("T")
_Ts = TypeVarTuple("_Ts")

WAIT_SLICE_S = 0.1  # how soon a waiting thread notices Ctrl-C


def checked_wait(what: str, name: str, value: object) -> float | None:
    """A blocking call's timeout argument `name` (ms or s), checked before the call turns it
    into its own wait: a number >= 0, None or infinity for no limit. Unchecked, poll("100")
    would be a TypeError from adding to a str, flush("1") an OverflowError."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"{what}: {name} must be a number >= 0 or None, got {value!r}")
    return None if value == float("inf") else value


GRPC_CYTHON_MODULE = "grpc._cython.cygrpc"  # where gRPC's completion dispatchers live


class ClientLoop(asyncio.SelectorEventLoop):
    """The loop of a `LoopThread`: once closed, it drops gRPC's completions (module
    docstring)."""

    def call_soon_threadsafe(
        self,
        callback: Callable[[*_Ts], object],
        *args: *_Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        if self.is_closed() and getattr(callback, "__module__", None) == GRPC_CYTHON_MODULE:
            return asyncio.Handle(callback, args, self, context)  # never run
        return super().call_soon_threadsafe(callback, *args, context=context)


class LoopThread:
    """A daemon thread running a private asyncio loop for one blocking client."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop: asyncio.AbstractEventLoop = ClientLoop()
        self._closed = False
        self._close_lock = threading.Lock()
        # `call_in_waiter`: the work, and a future set when there is some (what `run` waits on).
        self._inbox: queue.SimpleQueue[
            tuple[Callable[..., Any], tuple[Any, ...], concurrent.futures.Future[Any]]
        ] = queue.SimpleQueue()
        self._mail_lock = threading.Lock()
        self._mail: concurrent.futures.Future[None] = concurrent.futures.Future()
        started = threading.Event()
        self._thread = threading.Thread(target=self._main, args=(started,), name=name, daemon=True)
        self._thread.start()
        started.wait()
        self._at_exit = _close_at_exit(weakref.ref(self))
        atexit.register(self._at_exit)

    @property
    def closed(self) -> bool:
        return self._closed

    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def _main(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(started.set)
        try:
            self.loop.run_forever()
        finally:
            self._drain()

    def _drain(self) -> None:
        """After the loop stopped: cancel what is left, let it unwind, close the loop."""
        loop = self.loop
        try:
            tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        except Exception:  # the thread must end and close the loop whatever a task did
            log.exception("%s: error while shutting down the client's event loop", self.name)
        finally:
            loop.close()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start `coro` on the loop without waiting; its result comes as a thread-safe future
        (cancelling the future cancels the coroutine)."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._schedule(coro, future)
        return future

    def _schedule(self, coro: Coroutine[Any, Any, T], future: concurrent.futures.Future[T]) -> None:
        """Run `coro` on the loop with its outcome going to `future`, which the caller holds
        before the coroutine can start: a Ctrl-C that the coroutine's first steps provoke
        still finds the future to cancel."""
        if self._closed:
            coro.close()
            raise ClientClosedError(f"{self.name}: the client is closed")
        try:
            self.loop.call_soon_threadsafe(self._start, coro, future)
        except RuntimeError:  # the loop closed between the check and the call
            coro.close()
            raise ClientClosedError(f"{self.name}: the client is closed") from None

    def _start(self, coro: Coroutine[Any, Any, T], future: concurrent.futures.Future[T]) -> None:
        """On the loop: a task for `coro`, chained both ways with `future`."""
        if future.cancelled():
            coro.close()
            return
        task = self.loop.create_task(coro)

        def cancel_task(done: concurrent.futures.Future[T]) -> None:
            if done.cancelled():
                with contextlib.suppress(RuntimeError):  # RuntimeError: the loop is closed
                    self.loop.call_soon_threadsafe(task.cancel)

        def settle(done: asyncio.Task[T]) -> None:
            if done.cancelled():
                future.cancel()
                # Waiters (concurrent.futures.wait) learn of a cancellation only from this.
                future.set_running_or_notify_cancel()
            elif not future.set_running_or_notify_cancel():
                return  # cancelled meanwhile by the waiting thread
            elif (error := done.exception()) is not None:
                future.set_exception(error)
            else:
                future.set_result(done.result())

        future.add_done_callback(cancel_task)
        task.add_done_callback(settle)

    def run(self, coro: Coroutine[Any, Any, T], *, timeout_s: float | None, what: str) -> T:
        """Run `coro` on the loop and wait for its result (module docstring).

        `timeout_s` None: no limit of this method's own (the coroutine bounds itself)."""
        if self.in_loop_thread():
            coro.close()
            raise IllegalStateError(
                f"{what}: a blocking call from the client's own event loop thread (e.g. from a "
                "callback) would wait for itself forever"
            )
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        try:
            self._schedule(coro, future)
            deadline_ms = None if timeout_s is None else monotonic_ms() + int(timeout_s * 1000)
            while True:
                slice_s = WAIT_SLICE_S
                if deadline_ms is not None:
                    remaining_ms = deadline_ms - monotonic_ms()
                    if remaining_ms <= 0:
                        future.cancel()
                        assert timeout_s is not None
                        raise KafkaTimeoutError(
                            f"{what} did not finish within {int(timeout_s * 1000)} ms"
                        )
                    slice_s = min(slice_s, remaining_ms / 1000)
                waited: list[concurrent.futures.Future[Any]] = [future, self._mail]
                done, _ = concurrent.futures.wait(
                    waited,
                    timeout=slice_s,
                    return_when=concurrent.futures.FIRST_COMPLETED,
                )
                if self._mail in done:
                    self._serve_inbox()
                if future in done:
                    break
        except KeyboardInterrupt:
            future.cancel()  # the coroutine stops at its next await
            raise
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            # Not cancelled by us: the loop was closed under the call.
            raise ClientClosedError(f"{what}: the client was closed during the call") from None
        finally:
            # The future (also in `waited` and `done`) holds the exception raised, whose
            # traceback holds this frame: without this, the cycle keeps the caller's frames
            # (and what they hold: a confluent-kafka client's threads, say) alive until the
            # garbage collector's next full pass.
            del future, waited, done

    def call_in_waiter(self, fn: Callable[..., T], *args: Any) -> concurrent.futures.Future[T]:
        """From the loop: run `fn(*args)` in the thread waiting in `run` (module docstring);
        its outcome comes as the future."""
        done: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._inbox.put((fn, args, done))
        with self._mail_lock:
            if not self._mail.done():
                self._mail.set_result(None)
        return done

    def _serve_inbox(self) -> None:
        with self._mail_lock:
            self._mail = concurrent.futures.Future()
        while True:
            try:
                fn, args, done = self._inbox.get_nowait()
            except queue.Empty:
                return
            if not done.set_running_or_notify_cancel():
                continue
            try:
                done.set_result(fn(*args))
            except BaseException as exc:  # handed to the loop side, which raises it
                done.set_exception(exc)

    def call_soon(self, fn: Callable[..., object], *args: object) -> None:
        """Run `fn(*args)` on the loop soon; safe from any thread."""
        if self._closed:
            raise ClientClosedError(f"{self.name}: the client is closed")
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop closed between the check and the call
            raise ClientClosedError(f"{self.name}: the client is closed") from None

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the loop (cancelling what still runs on it) and join the thread; idempotent."""
        with self._close_lock:
            if not self._closed:
                self._closed = True
                atexit.unregister(self._at_exit)
                with contextlib.suppress(RuntimeError):  # RuntimeError: already closed
                    self.loop.call_soon_threadsafe(self.loop.stop)
        if not self.in_loop_thread():
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.warning(
                    "%s: the client's event loop thread did not stop within %.1f s",
                    self.name,
                    timeout_s,
                )


EXIT_CLOSE_S = 2.0  # how long the interpreter's exit waits for a forgotten client's loop


def _close_at_exit(ref: weakref.ref[LoopThread]) -> Callable[[], None]:
    """The exit hook of one loop thread: close it if it still exists (module docstring), in
    the process that started it (a forked child has no such thread)."""
    owner = os.getpid()

    def close() -> None:
        thread = ref()
        if thread is not None and os.getpid() == owner:
            thread.close(EXIT_CLOSE_S)

    return close
