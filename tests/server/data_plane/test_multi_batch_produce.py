"""The broker's side of a Produce entry that carries several batches of one partition, which
the producer sends when it has a backlog (replog/client/accumulator.py): the batches are
appended back to back under the entry's base offset, an entry with one bad batch appends
nothing, and an idempotent batch of such an entry, retried alone, is recognised as a
duplicate with its own offsets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replog.errors import CorruptRecordError
from replog.testing import ManualClock
from tests.server.data_plane.test_replica_manager import (
    batch,
    batch_offsets,
    produce,
    solo_node,
    whole_log,
)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def idempotent(sequence: int, count: int, tag: int) -> bytes:
    options: dict[str, Any] = {"producer_id": 7, "producer_epoch": 0, "base_sequence": sequence}
    return batch(count, tag=tag, **options)


@pytest.mark.asyncio
async def test_an_entry_of_several_batches_is_appended_back_to_back(
    tmp_path: Path, clock: ManualClock
) -> None:
    node = solo_node(tmp_path, clock)
    assert (await produce(node, batch(1))).base_offset == 0
    entry = idempotent(0, 2, tag=1) + idempotent(2, 3, tag=2) + idempotent(5, 1, tag=3)
    result = await produce(node, entry, acks=-1)
    assert result.error is None and result.base_offset == 1
    assert batch_offsets(whole_log(node)) == [(0, 0), (1, 2), (3, 5), (6, 6)]
    # Each batch of the entry is remembered on its own: a retry of the second, alone, is a
    # duplicate answered with its own offsets and not appended again.
    retry = await produce(node, idempotent(2, 3, tag=2))
    assert retry.error is None and retry.base_offset == 3
    assert node.log().log_end_offset == 7


@pytest.mark.asyncio
async def test_an_entry_with_one_bad_batch_appends_nothing(
    tmp_path: Path, clock: ManualClock
) -> None:
    node = solo_node(tmp_path, clock)
    corrupt = bytearray(batch(2, tag=2))
    corrupt[-1] ^= 0xFF
    result = await produce(node, batch(3, tag=1) + bytes(corrupt))
    assert isinstance(result.error, CorruptRecordError)
    assert node.log().log_end_offset == 0
