"""The blocking `Admin` client (`from replog import Admin`): the asyncio Admin on a private loop.

Same methods, arguments, results and errors as `replog.client.admin.Admin` (read its module
docstring for where requests go and the error rule), minus `await`:

    with Admin(bootstrap_servers="127.0.0.1:9092") as admin:
        admin.create_topics([NewTopic("orders", 6, 3)])
        print(admin.describe_topics(["orders"])["orders"].partitions)

Each method is declared once from its asyncio twin (`replog.client.twin`). Every call is
bounded by its `timeout_ms` (default `default.api.timeout.ms`), and Ctrl-C interrupts it at
once (the call is cancelled; see `LoopThread`). `close()` (or leaving the
`with` block) releases the connections and stops the loop thread; later calls raise
ClientClosedError.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from replog.admin.controller_results import AlterConfigOp, ConfigResource, NewPartitions, NewTopic
from replog.client import admin as aio
from replog.client.admin_results import OffsetSpec
from replog.client.config import AdminConfig
from replog.client.loop_thread import LoopThread, checked_wait
from replog.client.twin import awaited
from replog.clock import Clock, monotonic_ms
from replog.errors import ClientClosedError, InvalidRequestError

__all__ = ["Admin", "AlterConfigOp", "ConfigResource", "NewPartitions", "NewTopic", "OffsetSpec"]

T = TypeVar("T")

# The asyncio Admin enforces each call's timeout itself and names the cause; the loop thread's
# own limit, this much later, only guards against a call that failed to.
BACKSTOP_MS = 5_000


class Admin:
    """The blocking admin client (module docstring)."""

    def __init__(
        self,
        config: Mapping[str, object] | AdminConfig | None = None,
        *,
        clock: Clock = monotonic_ms,
        **kwargs: object,
    ) -> None:
        """`clock`: as the asyncio Admin's."""
        self._aio = aio.Admin(
            config, clock=clock, **kwargs
        )  # ConfigError here, before any thread starts
        self.config = self._aio.config
        self._loop = LoopThread(f"replog-admin-{self.config.client_id}")
        self._closed = False

    def close(self, timeout_ms: int | None = None) -> None:
        """Release every connection and stop the loop thread; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            limit_s = (self.config.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000
            self._loop.run(self._aio.close(), timeout_s=limit_s, what="Admin.close")
        finally:
            self._loop.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _run(self, coro: Coroutine[Any, Any, T], what: str, timeout_ms: int | None) -> T:
        if self._closed:
            coro.close()
            raise ClientClosedError(f"{what}: the Admin client is closed")
        try:
            checked_wait(what, "timeout_ms", timeout_ms)
        except ValueError as exc:
            coro.close()
            # The Admin's bad arguments are InvalidRequestError, as its asyncio side raises.
            raise InvalidRequestError(str(exc)) from None
        budget_ms = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms
        limit_s = (max(budget_ms, 0) + BACKSTOP_MS) / 1000
        return self._loop.run(coro, timeout_s=limit_s, what=what)

    def _call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        raise AssertionError(f"{what}: the Admin has no method of local state")

    # Each asyncio method, run on the loop thread (`twin`).
    create_topics = awaited(aio.Admin.create_topics)
    delete_topics = awaited(aio.Admin.delete_topics)
    create_partitions = awaited(aio.Admin.create_partitions)
    list_topics = awaited(aio.Admin.list_topics)
    describe_topics = awaited(aio.Admin.describe_topics)
    describe_cluster = awaited(aio.Admin.describe_cluster)
    describe_configs = awaited(aio.Admin.describe_configs)
    incremental_alter_configs = awaited(aio.Admin.incremental_alter_configs)
    elect_leaders = awaited(aio.Admin.elect_leaders)
    alter_partition_reassignments = awaited(aio.Admin.alter_partition_reassignments)
    list_partition_reassignments = awaited(aio.Admin.list_partition_reassignments)
    delete_records = awaited(aio.Admin.delete_records)
    delete_records_each = awaited(aio.Admin.delete_records_each, what="delete_records")
    list_offsets = awaited(aio.Admin.list_offsets)
    describe_quorum = awaited(aio.Admin.describe_quorum)
