"""The state file of a log opened on its own, without a `LogManager`.

A `LogManager` keeps recovery points, log start offsets and high watermarks in Kafka's per-dir
checkpoint files and a per-dir clean-shutdown marker. An application that embeds a single
`Log` has no log dir around it, so the log keeps the same facts in one small JSON file inside
its own partition directory, replaced atomically::

    {"version": 0, "clean_shutdown": false, "recovery_point": 170410,
     "log_start_offset": 0, "high_watermark": 170400}

Rules: `clean_shutdown` is true only after `close()` flushed everything; opening the log
rewrites it as false before anything else happens, so a crash while open (or during recovery)
is always detected as unclean. A malformed file is reported and treated as missing, which is
safe: the log then recovers from offset 0. It is rewritten when the log opens and closes, when
a segment rolls, on truncation and on a new log start offset, and by `flush()` only when the
recovery point moved to another segment (recovery works per segment, so a finer recovery point
buys nothing). The high watermark stored here can therefore lag; it is only a starting value,
clamped to the log on open.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass

from replog.storage.checkpoint_file import atomic_replace
from replog.storage.fs import FileSystem

STATE_FILE_NAME = ".replog-log-state"
_VERSION = 0

log = logging.getLogger("replog.storage")


@dataclass(frozen=True, slots=True)
class StandaloneState:
    clean_shutdown: bool = False
    recovery_point: int = 0
    log_start_offset: int = 0
    high_watermark: int = 0


def state_path(directory: str) -> str:
    return os.path.join(directory, STATE_FILE_NAME)


def read_state(directory: str, fs: FileSystem) -> StandaloneState:
    path = state_path(directory)
    raw = fs.read_bytes(path)
    if raw is None:
        return StandaloneState()
    try:
        doc = json.loads(raw.decode("utf-8"))
        if doc.get("version") != _VERSION:
            raise ValueError(f"version {doc.get('version')!r}, expected {_VERSION}")
        state = StandaloneState(
            clean_shutdown=bool(doc["clean_shutdown"]),
            recovery_point=int(doc["recovery_point"]),
            log_start_offset=int(doc["log_start_offset"]),
            high_watermark=int(doc["high_watermark"]),
        )
        if min(state.recovery_point, state.log_start_offset, state.high_watermark) < 0:
            raise ValueError("negative offset")
        return state
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, AttributeError) as exc:
        log.warning("%s is malformed (%s); recovering the whole log", path, exc)
        return StandaloneState()


def write_state(directory: str, fs: FileSystem, state: StandaloneState) -> None:
    doc = {
        "version": _VERSION,
        "clean_shutdown": state.clean_shutdown,
        "recovery_point": state.recovery_point,
        "log_start_offset": state.log_start_offset,
        "high_watermark": state.high_watermark,
    }
    atomic_replace(fs, state_path(directory), json.dumps(doc, sort_keys=True).encode("utf-8"))
