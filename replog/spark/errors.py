"""The errors of the Spark connector, each naming what was wrong.

- `SourceOptionError`: an unknown, missing, conflicting or malformed read option; the message
  names the option as Spark's Kafka source spells it (`startingOffsets`, not `startingoffsets`)
  and the value or partition at fault. Raised at planning, before any task runs.
- `DataLossError`: offsets a query planned to read are no longer in the log (retention,
  DeleteRecords, a deleted topic) and `failOnDataLoss` is true; names topic, partition and
  both offsets.
- `ReadTimeoutError`: a task could not read its planned range within `pollTimeoutMs`; names
  the partition, the range and how far it got.
- `MalformedFetchAnswerError`: a Fetch answer's bytes are not a FetchResponse protobuf would
  parse (`fetch_answer_wire`); names the message, the field and the byte position.

All derive from `replog.errors.ReplogError` like every other replog error.
"""

from __future__ import annotations

from replog.errors import ConfigError, ReplogError


class SourceOptionError(ConfigError):
    """A read option that is unknown, missing, conflicting or malformed (module docstring)."""


class DataLossError(ReplogError):
    """Planned offsets are gone from the log and failOnDataLoss is true (module docstring)."""


class ReadTimeoutError(ReplogError):
    """A task did not finish reading its range in time (module docstring)."""


class MalformedFetchAnswerError(ReplogError):
    """A Fetch answer's bytes are not a well-formed FetchResponse (module docstring)."""
