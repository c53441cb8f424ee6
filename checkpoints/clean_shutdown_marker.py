"""The clean-shutdown marker of a log dir, `.kafka_cleanshutdown`, and the broker epoch it holds.

The marker's existence says "every log in this dir was flushed and closed"; the log manager
deletes it at startup, before loading, so a crash during loading counts as unclean next time.
Its content (KIP-966) is the broker epoch of the run that wrote it, which the broker reports
when it registers again.

Grammar: one compact JSON object, no trailing newline::

    {"version":0,"brokerEpoch":<int64>}

Worked example: a broker shut down cleanly in broker epoch 4242 writes the 32 bytes
``{"version":0,"brokerEpoch":4242}``, which parse back to 4242.

Rules:
- Both keys are required, no other key is allowed, and both values must be JSON integers
  (not booleans or floats); `version` must be 0 and `brokerEpoch` in [-1, 2**63 - 1], -1
  meaning "no broker epoch". Anything else raises `CorruptCheckpointError` naming the file.
- Old Kafka releases wrote the marker empty; an empty marker is therefore corrupt here too.
  The caller decides whether a marker it cannot read still counts as a clean shutdown.
"""

from __future__ import annotations

import json

from replog.checkpoints.text_format import INT64_MAX
from replog.errors import CorruptCheckpointError

CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
CLEAN_SHUTDOWN_MARKER_VERSION = 0
NO_BROKER_EPOCH = -1


def _is_json_integer(value: object) -> bool:
    # bool is a subclass of int in Python, but `true` is not an integer in JSON.
    return isinstance(value, int) and not isinstance(value, bool)


def render_clean_shutdown_marker(broker_epoch: int) -> bytes:
    """The marker content for `broker_epoch`; ValueError when it is out of range."""
    if not NO_BROKER_EPOCH <= broker_epoch <= INT64_MAX:
        raise ValueError(f"broker epoch {broker_epoch} is outside [-1, {INT64_MAX}]")
    content = {"version": CLEAN_SHUTDOWN_MARKER_VERSION, "brokerEpoch": broker_epoch}
    return json.dumps(content, separators=(",", ":")).encode("ascii")


def parse_clean_shutdown_marker(data: bytes, *, source: str) -> int:
    """The broker epoch held by a marker file; `source` names the file in errors."""

    def corrupt(reason: str) -> CorruptCheckpointError:
        return CorruptCheckpointError(f"{source}: {reason}")

    try:
        content = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise corrupt(f"not UTF-8 ({e.reason} at byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise corrupt(f"not JSON: {e}") from None
    if not isinstance(content, dict):
        raise corrupt(f"expected a JSON object, found {type(content).__name__}")
    if set(content) != {"version", "brokerEpoch"}:
        raise corrupt(f"expected keys brokerEpoch and version, found {sorted(content)}")
    version, broker_epoch = content["version"], content["brokerEpoch"]
    if not _is_json_integer(version) or version != CLEAN_SHUTDOWN_MARKER_VERSION:
        raise corrupt(f"unsupported version {version!r}, expected 0")
    if not _is_json_integer(broker_epoch) or not NO_BROKER_EPOCH <= broker_epoch <= INT64_MAX:
        raise corrupt(f"broker epoch {broker_epoch!r} is not an integer in [-1, {INT64_MAX}]")
    return int(broker_epoch)
