"""Value types every layer shares: a topic-partition (`topic_partition`) and a committed
position (`offsets`).

Rules:
- Defined once, here; other modules import (and may re-export) them, never redefine them.
- Plain immutable values: no I/O, no behaviour beyond comparing, hashing and unpacking. This
  package imports nothing of replog, so every layer, the pure cores included, may import it.
"""

from replog.common.offsets import OffsetAndMetadata
from replog.common.topic_partition import TopicPartition, TopicPartitionKey

__all__ = ["OffsetAndMetadata", "TopicPartition", "TopicPartitionKey"]
