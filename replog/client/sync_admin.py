"""The blocking `Admin` client (`from replog import Admin`): the asyncio Admin on a private loop.

Same methods, arguments, results and errors as `replog.client.admin.Admin` (read its module
docstring for where requests go and the error rule), minus `await`:

    with Admin(bootstrap_servers="127.0.0.1:9092") as admin:
        admin.create_topics([NewTopic("orders", 6, 3)])
        print(admin.describe_topics(["orders"])["orders"].partitions)

Every call is bounded by its `timeout_ms` (default `default.api.timeout.ms`), and Ctrl-C
interrupts it at once (the call is cancelled; see `LoopThread`). `close()` (or leaving the
`with` block) releases the connections and stops the loop thread; later calls raise
ClientClosedError.
"""

from __future__ import annotations

from collections.abc import Coroutine, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from replog.admin.controller_results import (
    AlterConfigOp,
    ClusterDescription,
    ConfigResource,
    ConfigsAltered,
    CreatedTopic,
    DeletedTopic,
    ElectionResult,
    ElectionType,
    NewPartitions,
    NewTopic,
    OngoingReassignment,
    PartitionsCreated,
    ReassignmentResult,
    ResourceConfigs,
)
from replog.admin.quorum import QuorumDescription
from replog.client import admin as aio
from replog.client.admin_results import OffsetSpec, TopicDescription
from replog.client.config import AdminConfig
from replog.client.loop_thread import LoopThread, checked_wait
from replog.client.records import OffsetAndTimestamp, TopicPartition
from replog.errors import ClientClosedError, InvalidRequestError, ReplogError

__all__ = ["Admin", "AlterConfigOp", "ConfigResource", "NewPartitions", "NewTopic", "OffsetSpec"]

T = TypeVar("T")

# The asyncio Admin enforces each call's timeout itself and names the cause; the loop thread's
# own limit, this much later, only guards against a call that failed to.
BACKSTOP_MS = 5_000


class Admin:
    """The blocking admin client (module docstring)."""

    def __init__(
        self, config: Mapping[str, object] | AdminConfig | None = None, **kwargs: object
    ) -> None:
        self._admin = aio.Admin(config, **kwargs)  # ConfigError here, before any thread starts
        self.config = self._admin.config
        self._loop = LoopThread(f"replog-admin-{self.config.client_id}")
        self._closed = False

    def close(self, timeout_ms: int | None = None) -> None:
        """Release every connection and stop the loop thread; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            limit_s = (self.config.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000
            self._loop.run(self._admin.close(), timeout_s=limit_s, what="Admin.close")
        finally:
            self._loop.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _run(self, coro: Coroutine[Any, Any, T], timeout_ms: int | None, what: str) -> T:
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

    # --- topics and partitions -------------------------------------------------------------------

    def create_topics(
        self,
        new_topics: Sequence[NewTopic],
        validate_only: bool = False,
        *,
        timeout_ms: int | None = None,
    ) -> list[CreatedTopic]:
        coro = self._admin.create_topics(new_topics, validate_only, timeout_ms=timeout_ms)
        return self._run(coro, timeout_ms, "create_topics")

    def delete_topics(
        self, names: Iterable[str], *, timeout_ms: int | None = None
    ) -> list[DeletedTopic]:
        coro = self._admin.delete_topics(names, timeout_ms=timeout_ms)
        return self._run(coro, timeout_ms, "delete_topics")

    def create_partitions(
        self,
        new_partitions: Mapping[str, NewPartitions | int],
        validate_only: bool = False,
        *,
        timeout_ms: int | None = None,
    ) -> list[PartitionsCreated]:
        coro = self._admin.create_partitions(new_partitions, validate_only, timeout_ms=timeout_ms)
        return self._run(coro, timeout_ms, "create_partitions")

    def list_topics(
        self, *, include_internal: bool = False, timeout_ms: int | None = None
    ) -> list[str]:
        coro = self._admin.list_topics(include_internal=include_internal, timeout_ms=timeout_ms)
        return self._run(coro, timeout_ms, "list_topics")

    def describe_topics(
        self,
        names: Iterable[str] | None = None,
        *,
        include_internal: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[str, TopicDescription]:
        coro = self._admin.describe_topics(
            names, include_internal=include_internal, timeout_ms=timeout_ms
        )
        return self._run(coro, timeout_ms, "describe_topics")

    def describe_cluster(self, *, timeout_ms: int | None = None) -> ClusterDescription:
        coro = self._admin.describe_cluster(timeout_ms=timeout_ms)
        return self._run(coro, timeout_ms, "describe_cluster")

    # --- configs ---------------------------------------------------------------------------------

    def describe_configs(
        self,
        resources: Iterable[ConfigResource],
        keys: Sequence[str] = (),
        *,
        timeout_ms: int | None = None,
    ) -> dict[ConfigResource, ResourceConfigs]:
        coro = self._admin.describe_configs(resources, keys, timeout_ms=timeout_ms)
        return self._run(coro, timeout_ms, "describe_configs")

    def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Sequence[AlterConfigOp] | Mapping[str, str | None]],
        validate_only: bool = False,
        *,
        timeout_ms: int | None = None,
    ) -> list[ConfigsAltered]:
        coro = self._admin.incremental_alter_configs(changes, validate_only, timeout_ms=timeout_ms)
        return self._run(coro, timeout_ms, "incremental_alter_configs")

    # --- elections and reassignments -------------------------------------------------------------

    def elect_leaders(
        self,
        election_type: ElectionType | str = ElectionType.PREFERRED,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> list[ElectionResult]:
        coro = self._admin.elect_leaders(election_type, partitions, timeout_ms=timeout_ms)
        return self._run(coro, timeout_ms, "elect_leaders")

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        *,
        timeout_ms: int | None = None,
    ) -> list[ReassignmentResult]:
        coro = self._admin.alter_partition_reassignments(reassignments, timeout_ms=timeout_ms)
        return self._run(coro, timeout_ms, "alter_partition_reassignments")

    def list_partition_reassignments(
        self,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, OngoingReassignment]:
        coro = self._admin.list_partition_reassignments(partitions, timeout_ms=timeout_ms)
        return self._run(coro, timeout_ms, "list_partition_reassignments")

    # --- records and offsets ---------------------------------------------------------------------

    def delete_records(
        self, before: Mapping[TopicPartition, int], *, timeout_ms: int | None = None
    ) -> dict[TopicPartition, int]:
        coro = self._admin.delete_records(before, timeout_ms=timeout_ms)
        return self._run(coro, timeout_ms, "delete_records")

    def delete_records_each(
        self, before: Mapping[TopicPartition, int], *, timeout_ms: int | None = None
    ) -> dict[TopicPartition, int | ReplogError]:
        coro = self._admin.delete_records_each(before, timeout_ms=timeout_ms)
        return self._run(coro, timeout_ms, "delete_records")

    def list_offsets(
        self,
        specs: Mapping[TopicPartition, OffsetSpec | int],
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        coro = self._admin.list_offsets(specs, timeout_ms=timeout_ms)
        return self._run(coro, timeout_ms, "list_offsets")

    # --- the metadata quorum ---------------------------------------------------------------------

    def describe_quorum(self, *, timeout_ms: int | None = None) -> QuorumDescription:
        coro = self._admin.describe_quorum(timeout_ms=timeout_ms)
        return self._run(coro, timeout_ms, "describe_quorum")
