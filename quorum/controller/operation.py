"""Write and read operations: functions the controller runs against its managers.

A write operation sees the latest state (uncommitted writes included, so successive writes
see each other) and returns a `ControllerResult`; the controller appends and replays its
records and answers once they commit. A read operation sees the state at the last stable
offset, which it must pass to every manager query (`ctx.offset`), so it never sees anything
that could still be rolled back.

Rules:
- A write operation changes no timeline state itself (its records do, when replayed); it may
  raise a `KafkaError` to answer the caller with that error, which changes nothing else.
  Any other exception is a bug: the controller gives up leadership
  (docs/design/kraft.md#controller).
- A read operation changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from replog.quorum.controller.cluster_control import ClusterControl
from replog.quorum.controller.config_control import ConfigControl
from replog.quorum.controller.controller_result import ControllerResult
from replog.quorum.controller.feature_control import FeatureControl
from replog.quorum.controller.producer_id_control import ProducerIdControl
from replog.quorum.controller.replication_control import ReplicationControl
from replog.quorum.controller.scram_credentials import ScramCredentials

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class WriteContext:
    cluster: ClusterControl
    configs: ConfigControl
    features: FeatureControl
    producer_ids: ProducerIdControl
    replication: ReplicationControl
    scram: ScramCredentials
    now_ms: int
    # The offset the write's first record will land at (a new broker's epoch).
    next_write_offset: int


@dataclass(frozen=True, slots=True)
class ReadContext:
    cluster: ClusterControl
    configs: ConfigControl
    features: FeatureControl
    producer_ids: ProducerIdControl
    replication: ReplicationControl
    scram: ScramCredentials
    # The last stable offset: pass it to every manager query.
    offset: int


WriteOperation = Callable[[WriteContext], ControllerResult[R]]
ReadOperation = Callable[[ReadContext], R]
