"""The errors of the Spark connector, each naming what was wrong.

- `SourceOptionError`: an unknown, missing, conflicting or malformed read option; the message
  names the option as Spark's Kafka source spells it (`startingOffsets`, not `startingoffsets`)
  and the value or partition at fault. Raised at planning, before any task runs.
- `DataLossError`: offsets a query planned to read are no longer in the log (retention,
  DeleteRecords, a deleted or re-created topic, a truncated log) and `failOnDataLoss` is true;
  names topic, partition and both offsets. `report_data_loss` raises it, or with
  `failOnDataLoss=false` logs the same message as a warning and lets the caller go on.
- `ReadTimeoutError`: a task made no progress on its planned range for `pollTimeoutMs`;
  names the partition, the range and how far it got.

All derive from `replog.errors.ReplogError` like every other replog error.
"""

from __future__ import annotations

import logging

from replog.errors import ConfigError, ReplogError

log = logging.getLogger("replog.spark")


class SourceOptionError(ConfigError):
    """A read option that is unknown, missing, conflicting or malformed (module docstring)."""


class DataLossError(ReplogError):
    """Planned offsets are gone from the log and failOnDataLoss is true (module docstring)."""


def report_data_loss(message: str, fail_on_data_loss: bool, *, instead: str = "skipped") -> None:
    """`DataLossError(message)` if `fail_on_data_loss`; else a warning saying what the caller
    does `instead` (module docstring)."""
    if fail_on_data_loss:
        raise DataLossError(message + "; set failOnDataLoss=false to skip them")
    log.warning("%s; %s (failOnDataLoss=false)", message, instead)


class ReadTimeoutError(ReplogError):
    """A task made no progress on its range in time (module docstring)."""
