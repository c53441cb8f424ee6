"""The event stream of `replog demo`: a background thread sending keyed events, acks=all.

One blocking `replog.Producer` (acks=all, enable.idempotence=true) sends `records` events
(`demo_events.nth_event`) at up to `rate` per second (0: as fast as it takes them), then
flushes. Each send's outcome is recorded by its future's callbacks on the client's loop
thread: the (key, seq) goes to `acknowledged` when the future succeeded, to `failed` (with
the error) when it failed. Nothing else counts as an acknowledgement.

Rules:
- The counters are read by the demo's main thread every second: they are guarded by a lock.
- A send that raises (the buffer stayed full for max.block.ms, the producer was closed) ends
  the stream; the error is kept in `error` and the demo reports it.
- `abort()` (Ctrl-C, a failure elsewhere) stops the thread and closes the producer without
  waiting for what is queued.
"""

from __future__ import annotations

import contextlib
import threading
import time

from replog.cli.demo_events import nth_event
from replog.cli.demo_verify import EventId
from replog.client.sync_producer import Producer
from replog.errors import ReplogError

PACE_SLICE_S = 0.01  # the throttle's granularity


class EventStream:
    def __init__(self, bootstrap: str, topic: str, records: int, rate: int, key_count: int) -> None:
        self.topic = topic
        self.records = records
        self.rate = rate
        self.key_count = key_count
        self.acknowledged: set[EventId] = set()
        self.failed: dict[EventId, str] = {}
        self.sent = 0
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._producer = Producer(
            bootstrap_servers=bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            client_id="replog-demo",
        )
        self._thread = threading.Thread(target=self._run, name="replog-demo-stream", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def done(self) -> bool:
        return not self._thread.is_alive()

    def join(self, timeout_s: float | None = None) -> None:
        self._thread.join(timeout_s)

    def counts(self) -> tuple[int, int]:
        """(acknowledged, failed) so far."""
        with self._lock:
            return len(self.acknowledged), len(self.failed)

    def outcomes(self) -> tuple[set[EventId], dict[EventId, str], int]:
        """Copies of (acknowledged, failed, sent)."""
        with self._lock:
            return set(self.acknowledged), dict(self.failed), self.sent

    def abort(self) -> None:
        self._stop.set()
        with contextlib.suppress(ReplogError):
            self._producer.close(timeout=0)
        self._thread.join(5)

    # --- the thread -------------------------------------------------------------------------------

    def _on_ack(self, event_id: EventId, _metadata: object) -> None:
        with self._lock:
            self.acknowledged.add(event_id)

    def _on_error(self, event_id: EventId, exception: BaseException) -> None:
        with self._lock:
            self.failed[event_id] = f"{type(exception).__name__}: {exception}"

    def _run(self) -> None:
        started = time.monotonic()
        try:
            for index in range(self.records):
                if self._stop.is_set():
                    return
                if self.rate > 0:
                    due_s = started + index / self.rate
                    while (wait_s := due_s - time.monotonic()) > 0:
                        if self._stop.wait(min(wait_s, PACE_SLICE_S)):
                            return
                event = nth_event(index, self.key_count)
                event_id = (event.key, event.seq)
                future = self._producer.send(
                    self.topic, event.record_value(), key=event.record_key()
                )
                with self._lock:
                    self.sent += 1
                future.add_callback(self._on_ack, event_id)
                future.add_errback(self._on_error, event_id)
            self._producer.flush()
        except BaseException as exc:  # kept for the main thread, which reports it
            self.error = exc
        finally:
            with contextlib.suppress(ReplogError):
                self._producer.close(timeout=0 if self._stop.is_set() else None)
