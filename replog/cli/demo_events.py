"""The events `replog demo` writes: keyed, numbered per key, each with an amount.

Pure: no I/O. The stream, the verification and the Spark step all read events through this
module, so the three agree on the format.

Rules:
- Keys are `user-0` .. `user-<K-1>`; the i-th event of the stream goes to key `i mod K` (every
  key gets events at the same pace, so every partition takes part).
- Each key numbers its events from 0 (`seq`): the idempotent producer keeps one partition's
  records in send order, and a key always maps to one partition, so a key's sequence numbers
  must appear in the log in increasing order.
- The amount (whole cents, 1..9999) is a function of key and sequence number, so a checker
  can recompute it and a sum over the log is reproducible.
- The value is compact JSON `{"key": "user-7", "seq": 12, "amount": 4711}`; the record key is
  the key's UTF-8 bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

KEY_PREFIX = "user-"


@dataclass(frozen=True, slots=True)
class Event:
    key: str
    seq: int
    amount: int  # cents

    @property
    def key_number(self) -> int:
        return int(self.key[len(KEY_PREFIX) :])

    def record_key(self) -> bytes:
        return self.key.encode()

    def record_value(self) -> bytes:
        document = {"key": self.key, "seq": self.seq, "amount": self.amount}
        return json.dumps(document, separators=(",", ":")).encode()


def amount_for(key_number: int, seq: int) -> int:
    """A spread of amounts that looks arbitrary but is a pure function (cheap, no hashing)."""
    return (key_number * 7919 + seq * 104729) % 9999 + 1


def nth_event(index: int, key_count: int) -> Event:
    """The `index`-th event of a stream over `key_count` keys (module rules)."""
    key_number = index % key_count
    seq = index // key_count
    return Event(f"{KEY_PREFIX}{key_number}", seq, amount_for(key_number, seq))


def key_group(key_number: int, groups: int = 10) -> str:
    """The group a key belongs to in the Spark aggregation (last digit: `*3` for user-13)."""
    return f"*{key_number % groups}"


def parse_event(key: bytes | None, value: bytes | None) -> Event:
    """The event a record holds; `ValueError` naming what is wrong if it is not one of ours."""
    if key is None or value is None:
        raise ValueError(f"record without {'key' if key is None else 'value'}")
    try:
        document = json.loads(value)
        event = Event(str(document["key"]), int(document["seq"]), int(document["amount"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"value {value[:60]!r} is not a demo event ({exc})") from None
    if event.record_key() != key:
        raise ValueError(f"record key {key!r} differs from the value's key {event.key!r}")
    if not event.key.startswith(KEY_PREFIX) or not event.key[len(KEY_PREFIX) :].isdigit():
        raise ValueError(f"key {event.key!r} is not a demo key")
    if event.amount != amount_for(event.key_number, event.seq):
        raise ValueError(f"{event.key} seq {event.seq}: amount {event.amount} was not sent")
    return event
