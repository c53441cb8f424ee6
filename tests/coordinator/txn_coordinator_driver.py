"""A test driver of the transaction coordinator's decisions: it keeps one transactional id's
metadata, applies `Append` decisions with a chosen append outcome, writes markers at once,
and hands back what a client would be answered. It stands in for the shell."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from replog.coordinator.transaction_metadata import TxnMetadata, TxnState, abandon, complete
from replog.coordinator.transaction_rules import (
    Answer,
    Append,
    Decision,
    Refuse,
    add_partitions,
    complete_after_markers,
    end_txn,
    init_producer_id,
)
from replog.errors import KafkaError

MAX_TIMEOUT_MS = 900_000


@dataclass
class Outcome:
    """What a client hears: an error class or a (producer id, epoch)."""

    error: type[KafkaError] | None = None
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass
class Driver:
    tid: str = "txn-1"
    meta: TxnMetadata | None = None
    log: list[TxnMetadata] = field(default_factory=list)  # the committed records
    markers: list[tuple[int, int, bool]] = field(default_factory=list)  # (pid, epoch, commit)
    ids: itertools.count = field(default_factory=lambda: itertools.count(1000))

    def allocate(self) -> int:
        return next(self.ids)

    def apply(
        self, decision: Decision, *, append_ok: bool = True, write_markers: bool = True
    ) -> Outcome:
        if isinstance(decision, Refuse):
            return Outcome(decision.error)
        if isinstance(decision, Answer):
            return Outcome(None, decision.producer_id, decision.producer_epoch)
        assert isinstance(decision, Append)
        if not append_ok:
            self.meta = abandon(decision.pending, fence=decision.fence)
            return Outcome(_AppendFailed)
        self.meta = complete(decision.pending, decision.record)
        self.log.append(decision.record)
        answer = Outcome(decision.answer_error, self.meta.producer_id, self.meta.producer_epoch)
        if self.meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT) and write_markers:
            self.finish_markers()
        return answer

    def finish_markers(self, now_ms: int = 0) -> None:
        assert self.meta is not None
        self.markers.append(
            (
                self.meta.producer_id,
                self.meta.producer_epoch,
                self.meta.state is TxnState.PREPARE_COMMIT,
            )
        )
        step = complete_after_markers(self.meta, now_ms)
        self.meta = complete(step.pending, step.record)
        self.log.append(step.record)


def init(d: Driver, expected=None, *, version=2, now_ms=0, timeout_ms=60_000, **apply):
    return d.apply(
        init_producer_id(
            d.meta,
            d.tid,
            timeout_ms,
            expected,
            now_ms=now_ms,
            max_timeout_ms=MAX_TIMEOUT_MS,
            allocate=d.allocate,
            server_version=version,
        ),
        **apply,
    )


def add(d: Driver, pid, epoch, parts=(("orders", 0),), *, version=2, now_ms=0, **apply):
    decision = add_partitions(d.meta, d.tid, pid, epoch, parts, now_ms=now_ms, version=version)
    return d.apply(decision, **apply)


def end(d: Driver, pid, epoch, commit, *, version=2, now_ms=0, **apply):
    decision = end_txn(
        d.meta,
        d.tid,
        pid,
        epoch,
        commit=commit,
        from_client=True,
        version=version,
        now_ms=now_ms,
        allocate=d.allocate,
    )
    return d.apply(decision, **apply)


class _AppendFailed(KafkaError):
    """The driver's stand-in for a failed append to `__transaction_state`."""
