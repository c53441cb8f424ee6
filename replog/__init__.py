"""replog: an embeddable replicated log with Kafka's on-disk format and replication semantics.

The blocking client library, shaped like kafka-python's:

    from replog import Producer, Consumer, Admin, TopicPartition

(the asyncio classes, with the same names and methods, are in `replog.aio`). Errors are the
classes of `replog.errors`, one per Kafka error code.

The names are loaded on first use (module `__getattr__`), so `import replog` stays cheap for
the command-line tool and the server.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# What both the blocking (`replog`) and the asyncio (`replog.aio`) namespaces export:
# name -> (module, attribute in it).
_SHARED_EXPORTS: dict[str, tuple[str, str]] = {
    "TopicPartition": ("replog.client.records", "TopicPartition"),
    "RecordMetadata": ("replog.client.records", "RecordMetadata"),
    "ConsumerRecord": ("replog.client.records", "ConsumerRecord"),
    "OffsetAndMetadata": ("replog.client.records", "OffsetAndMetadata"),
    "OffsetAndTimestamp": ("replog.client.records", "OffsetAndTimestamp"),
    "ConsumerGroupMetadata": ("replog.client.records", "ConsumerGroupMetadata"),
    "NewTopic": ("replog.admin.controller_results", "NewTopic"),
    "NewPartitions": ("replog.admin.controller_results", "NewPartitions"),
    "ConfigResource": ("replog.admin.controller_results", "ConfigResource"),
    "ConfigResourceType": ("replog.admin.controller_results", "ConfigResourceType"),
    "AlterConfigOp": ("replog.admin.controller_results", "AlterConfigOp"),
    "AlterConfigOpType": ("replog.admin.controller_results", "AlterConfigOpType"),
    "ElectionType": ("replog.admin.controller_results", "ElectionType"),
    "OffsetSpec": ("replog.client.admin_results", "OffsetSpec"),
}
_EXPORTS: dict[str, tuple[str, str]] = {
    "Producer": ("replog.client.sync_producer", "Producer"),
    "Consumer": ("replog.client.sync_consumer", "Consumer"),
    "Admin": ("replog.client.sync_admin", "Admin"),
    **_SHARED_EXPORTS,
    "errors": ("replog.errors", ""),  # "": the module itself
}

__all__ = [
    "Admin",
    "AlterConfigOp",
    "AlterConfigOpType",
    "ConfigResource",
    "ConfigResourceType",
    "Consumer",
    "ConsumerGroupMetadata",
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
    "__version__",
    "errors",
]

if TYPE_CHECKING:  # what type checkers see; at run time `__getattr__` loads these on use
    from replog import errors
    from replog.admin.controller_results import (
        AlterConfigOp,
        AlterConfigOpType,
        ConfigResource,
        ConfigResourceType,
        ElectionType,
        NewPartitions,
        NewTopic,
    )
    from replog.client.admin_results import OffsetSpec
    from replog.client.records import (
        ConsumerGroupMetadata,
        ConsumerRecord,
        OffsetAndMetadata,
        OffsetAndTimestamp,
        RecordMetadata,
        TopicPartition,
    )
    from replog.client.sync_admin import Admin
    from replog.client.sync_consumer import Consumer
    from replog.client.sync_producer import (  # type: ignore[import-not-found, unused-ignore]
        Producer,
    )


def _load_export(
    namespace: dict[str, Any], package: str, exports: dict[str, tuple[str, str]], name: str
) -> Any:
    """`package`'s exported `name`, imported now and kept in `namespace` (its globals), so
    later lookups do not come back here."""
    try:
        module_name, attribute = exports[name]
    except KeyError:
        raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = getattr(module, attribute) if attribute else module
    namespace[name] = value
    return value


def __getattr__(name: str) -> Any:
    """Load an exported name on first use (module docstring)."""
    return _load_export(globals(), __name__, _EXPORTS, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
