"""One partition of one topic.

- `TopicPartition(topic, partition)`: the named tuple users and the clients see (kafka-python's
  shape: it compares, hashes and unpacks as the plain tuple).
- `TopicPartitionKey`: `(topic, partition)` as a plain tuple, the key of the engine's maps.
  Building a named tuple costs a Python call per key where a tuple display costs none, so the
  node's hot paths key by plain tuples; a `TopicPartition` is one, and passes wherever a key
  is asked for.
"""

from __future__ import annotations

from typing import NamedTuple

TopicPartitionKey = tuple[str, int]


class TopicPartition(NamedTuple):
    topic: str
    partition: int
