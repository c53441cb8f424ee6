"""Value types every layer shares: a topic-partition (`topic_partition`), offsets and a
committed position (`offsets`), topic ids (`ids`), Kafka's ACL codes (`acl_codes`), the SCRAM
mechanisms (`scram_mechanism`), a feature update of UpdateFeatures (`feature_update`) and
`metadata.version`'s level names (`metadata_versions`); and `frozen_init`, the cheaper
`__init__` of the frozen dataclasses built per partition on hot paths.

Rules:
- Defined once, here; other modules import (and may re-export) them, never redefine them.
- Plain immutable values and their conversions (a topic id to and from bytes and text): no
  I/O. This package imports nothing of replog, so every layer, the pure cores included, may
  import it.
"""

from replog.common.offsets import OffsetAndMetadata
from replog.common.topic_partition import TopicPartition, TopicPartitionKey

__all__ = ["OffsetAndMetadata", "TopicPartition", "TopicPartitionKey"]
