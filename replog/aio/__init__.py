"""The asyncio client library: the same classes as `replog`, with awaitable methods.

    from replog.aio import Producer, Consumer, Admin, TopicPartition

    async with Producer(bootstrap_servers="127.0.0.1:9092") as producer:
        metadata = await producer.send("orders", b"hello")

The names are loaded on first use (module `__getattr__`), as in `replog`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from replog import _SHARED_EXPORTS, _load_export

_EXPORTS: dict[str, tuple[str, str]] = {
    "Producer": ("replog.client.producer", "Producer"),
    "Consumer": ("replog.client.consumer", "Consumer"),
    "Admin": ("replog.client.admin", "Admin"),
    **_SHARED_EXPORTS,
}

__all__ = [
    "Admin",
    "AlterConfigOp",
    "AlterConfigOpType",
    "ConfigResource",
    "ConfigResourceType",
    "Consumer",
    "ConsumerRecord",
    "ElectionType",
    "NewPartitions",
    "NewTopic",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "OffsetSpec",
    "Producer",
    "RecordMetadata",
    "TopicPartition",
]

if TYPE_CHECKING:  # what type checkers see; at run time `__getattr__` loads these on use
    from replog.admin.controller_results import (
        AlterConfigOp,
        AlterConfigOpType,
        ConfigResource,
        ConfigResourceType,
        ElectionType,
        NewPartitions,
        NewTopic,
    )
    from replog.client.admin import Admin
    from replog.client.admin_results import OffsetSpec
    from replog.client.consumer import Consumer  # type: ignore[import-not-found, unused-ignore]
    from replog.client.producer import Producer  # type: ignore[import-not-found, unused-ignore]
    from replog.client.records import (
        ConsumerRecord,
        OffsetAndMetadata,
        OffsetAndTimestamp,
        RecordMetadata,
        TopicPartition,
    )


def __getattr__(name: str) -> Any:
    """Load an exported name on first use (module docstring)."""
    return _load_export(globals(), __name__, _EXPORTS, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
