"""DeferredSyncs: the small-file writes that the replica manager's rounds leave unsynced (new
leaders' epoch checkpoints), written and synced off the event loop by one task, the writes of
many rounds in one sync, while the rounds go on.

Rules:
- `add(unsynced)` never waits. A round of leadership changes hands what it wrote to this and
  goes on to the next round at once.
- One sync at a time. What rounds add while it runs goes into the next one, merged
  (`Unsynced.absorb`), so the number of syncs follows the disk's speed, not the number of
  rounds: a restarted broker that takes 10,000 leaderships in 40 rounds makes a few syncs.
- Nothing depends on when the sync happens: until its file is synced, a log writes and syncs
  a deferred epoch checkpoint itself before its recovery point passes any record
  (`LeaderEpochCheckpointFile.needs_sync`, `Log._flush`) and at its close, and a log whose
  directory is renamed aside (deleted, stray) drops its unwritten entries first
  (docs/storage.md, "Creating many replicas").
- `drain()` waits until everything added before it is synced; `stop()` lets the sync under way
  finish and starts no other (what is left, each log's close syncs).
- A failed sync is a storage error: it goes to `on_storage_error` (the broker stops), and
  nothing is synced here after it.

Why not wait per round: each round of 250 leadership changes waited for its own `syncfs`,
which also writes back everything else dirty on the file system: 0.15-3.7 s a round on this
machine while other work wrote to the disk, 12-50 s for a broker to take 10,000 leaderships
after a restart, with its event loop idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from replog.errors import KafkaStorageError
from replog.server.runtime.bulk_threads import run_bulk
from replog.server.runtime.node_tasks import Spawner
from replog.storage.fs import Unsynced

log = logging.getLogger("replog.server.data_plane.replica_manager")


class DeferredSyncs:
    """Syncs `Unsynced` writes in a task of its own (module docstring)."""

    def __init__(
        self,
        sync: Callable[[Unsynced], None],
        *,
        tasks: Spawner,
        on_storage_error: Callable[[KafkaStorageError], None] | None = None,
        name: str = "the replica manager's deferred syncs",
    ) -> None:
        self._sync = sync
        self._spawner = tasks
        self._on_storage_error = on_storage_error
        self._name = name
        self._waiting: Unsynced | None = None
        self._wake = asyncio.Event()
        self._synced = asyncio.Event()  # set while nothing added waits or is being synced
        self._synced.set()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._failed = False

    def add(self, unsynced: Unsynced) -> None:
        """Sync `unsynced` soon, with whatever else is waiting; returns at once."""
        if not unsynced or self._stopped or self._failed:
            return
        if self._waiting is None:
            self._waiting = Unsynced()
        self._waiting.absorb(unsynced)
        self._synced.clear()
        self._wake.set()
        if self._task is None:
            self._task = self._spawner.spawn(self._run(), name=self._name)

    @property
    def waiting(self) -> bool:
        """Whether something added is not synced yet."""
        return not self._synced.is_set()

    async def drain(self) -> None:
        """Until everything added so far is synced (or the syncs stopped)."""
        await self._synced.wait()

    async def stop(self) -> None:
        """Let the sync under way finish; start no other."""
        self._stopped = True
        self._wake.set()
        task, self._task = self._task, None
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._waiting = None
        self._synced.set()

    async def _run(self) -> None:
        while not self._stopped:
            await self._wake.wait()
            self._wake.clear()
            batch, self._waiting = self._waiting, None
            if batch is not None and not self._stopped:
                try:
                    await run_bulk(self._sync, batch)
                except KafkaStorageError as error:
                    self._fail(error)
                    return
                except OSError as exc:
                    self._fail(KafkaStorageError(f"syncing deferred writes: {exc}"))
                    return
            if self._waiting is None:
                self._synced.set()

    def _fail(self, error: KafkaStorageError) -> None:
        self._failed = True
        self._waiting = None
        self._synced.set()
        if self._on_storage_error is None:
            log.critical("deferred syncs stop: %s", error)
        else:
            self._on_storage_error(error)
