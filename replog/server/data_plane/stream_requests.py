"""The request side of one bidirectional-stream call a node serves (the Broker service's
ProduceStream and FetchStream, the ReplicaFetch service's Fetch): its requests read ahead of
the answers, a bounded number at a time, and a way to end the call when the broker stops
serving.

Rules: a task reads the call's requests, at most `depth` of them not yet `release`d, and
queues `admit(r)` for each request r, then None when they end. `stop` (the broker stops
serving) queues `STOPPING`, which ends the call even while it waits for its next request; the
queue is what the call reads, rather than the requests themselves, for that. A get that finds
an item does not suspend: the cost per request is a put and an uncontended semaphore.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

# Put into an open stream call's queue when the broker stops serving.
STOPPING: Any = object()


class StreamRequests:
    """One stream call's requests (module rules)."""

    def __init__(
        self, requests: AsyncIterator[Any], depth: int, admit: Callable[[Any], Any]
    ) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self._slots = asyncio.Semaphore(depth)
        self._reader = asyncio.create_task(self._take(requests, admit))

    async def _take(self, requests: AsyncIterator[Any], admit: Callable[[Any], Any]) -> None:
        try:
            async for request in requests:
                await self._slots.acquire()
                self.queue.put_nowait(admit(request))
        finally:
            self.queue.put_nowait(None)

    def release(self) -> None:
        """One request's turn is over: the reader may read one more ahead."""
        self._slots.release()

    def stop(self) -> None:
        self.queue.put_nowait(STOPPING)

    async def ended(self) -> None:
        """After the None: a failure reading the requests is the call's."""
        await self._reader

    def close(self) -> None:
        """Stop the reader; a failure it ended with is retrieved (the call's status already
        says what ended it), so asyncio does not log it as never retrieved."""
        if self._reader.done():
            if not self._reader.cancelled():
                self._reader.exception()
        else:
            self._reader.cancel()
