"""Topic ids: 16 raw bytes on the wire, `uuid.UUID` in memory, Kafka's text form for people.

- `UUID_BYTES`: a topic id's length on the wire (an empty field means "none").
- `topic_id_from_bytes`: 16 raw bytes -> UUID; empty or all-zero bytes (Kafka's ZERO_UUID)
  -> None.
- `topic_id_text`: a topic id as Kafka prints and stores it (`Uuid.toString`: URL-safe base64,
  no padding, 22 characters); None prints as the zero id.
"""

from __future__ import annotations

import base64
from uuid import UUID

UUID_BYTES = 16


def topic_id_from_bytes(raw: bytes) -> UUID | None:
    """16 raw bytes -> UUID; empty or all-zero bytes (Kafka's ZERO_UUID) -> None."""
    if len(raw) != UUID_BYTES or not any(raw):
        return None
    return UUID(bytes=raw)


def topic_id_text(topic_id: UUID | None) -> str:
    """A topic id as Kafka prints it (`Uuid.toString`: URL-safe base64, no padding)."""
    raw = topic_id.bytes if topic_id is not None else bytes(UUID_BYTES)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
