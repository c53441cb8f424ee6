"""The cleaner's key map (replog/storage/cleaner/offset_map.py) answers alike while its keys are
in a dict, after they move into the buffer part-way through a pass, and after a clear."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from replog.record.record_spans import Span
from replog.storage.cleaner.offset_map import KEY_ENTRY_BYTES, OffsetMap, OffsetMapFullError


@settings(max_examples=100, deadline=None)
@given(
    slots=st.integers(40, 400),
    passes=st.lists(
        st.lists(st.tuples(st.binary(max_size=3), st.integers(0, 1000)), max_size=60),
        min_size=1,
        max_size=3,
    ),
)
def test_the_map_answers_as_a_dict_in_both_of_its_forms(
    slots: int, passes: list[list[tuple[bytes, int]]]
) -> None:
    offset_map = OffsetMap(24 * slots)
    for puts in passes:
        offset_map.clear()
        model: dict[bytes, int] = {}
        for key, offset in puts:
            try:
                offset_map.put(key, offset)
            except OffsetMapFullError:
                assert key not in model and len(model) == offset_map.max_entries
                continue
            model[key] = max(offset, model.get(key, -1))
            assert len(offset_map) == len(model) <= offset_map.max_entries
        assert {key: offset_map.get(key) for key in model} == model
        assert offset_map.get(b"absent-key") == -1
        assert offset_map.latest_offset == max(model.values(), default=-1)


def test_keys_move_into_the_buffer_past_a_quarter_of_it() -> None:
    offset_map = OffsetMap(24 * 1_000)  # a quarter: 6,000 bytes
    fit = 6_000 // (KEY_ENTRY_BYTES + 2)
    for i in range(fit):
        offset_map.put(b"%02d" % i, i)
    assert offset_map._keys is not None and not any(offset_map._buffer[: 24 * 1_000])
    offset_map.put(b"xx", 99)
    assert offset_map._keys is None and any(offset_map._buffer[: 24 * 1_000])
    assert [offset_map.get(b"%02d" % i) for i in range(fit)] == list(range(fit))
    offset_map.clear()
    assert offset_map._keys == {} and not any(offset_map._buffer[: 24 * 1_000])


def _put_one_by_one(offset_map: OffsetMap, base_offset: int, spans: list[Span], start: int) -> bool:
    """`put_records` by its definition: `put` of each keyed record from `start` while the map
    is not full before it."""
    for span in spans:
        key = span[2]
        if key is not None and base_offset + span[0] >= start:
            if offset_map.is_full:
                return False
            offset_map.put(key, base_offset + span[0])
    return True


@settings(max_examples=150, deadline=None)
@given(
    slots=st.integers(2, 200),
    start=st.integers(0, 30),
    batches=st.lists(
        st.lists(st.one_of(st.none(), st.binary(min_size=1, max_size=40)), max_size=40),
        max_size=8,
    ),
)
def test_a_batchs_records_put_at_once_leave_the_map_as_one_by_one(
    slots: int, start: int, batches: list[list[bytes | None]]
) -> None:
    at_once, one_by_one = OffsetMap(24 * slots), OffsetMap(24 * slots)
    base_offset = 0
    for keys in batches:
        spans: list[Span] = [(delta, 0, key, False, 0, 0, 0) for delta, key in enumerate(keys)]
        took = at_once.put_records(base_offset, spans, start)
        assert took == _put_one_by_one(one_by_one, base_offset, spans, start)
        assert (len(at_once), at_once.latest_offset) == (len(one_by_one), one_by_one.latest_offset)
        assert (at_once._keys is None) == (one_by_one._keys is None)  # moved alike, if at all
        if not took:
            break
        base_offset += len(keys)
    every_key = {key for keys in batches for key in keys if key is not None}
    assert {k: at_once.get(k) for k in every_key} == {k: one_by_one.get(k) for k in every_key}


@settings(max_examples=150, deadline=None)
@given(
    slots=st.integers(4, 300),
    keys=st.lists(st.binary(max_size=2), max_size=80),
    bases=st.lists(st.integers(0, 90), min_size=1, max_size=8, unique=True).map(sorted),
    by_batch=st.booleans(),
)
def test_a_range_is_superseded_when_an_offset_put_from_it_is_not_answered(
    slots: int, keys: list[bytes], bases: list[int], by_batch: bool
) -> None:
    offset_map = OffsetMap(24 * slots)
    offset_map.watch(bases)
    put: list[tuple[bytes, int]] = []
    if by_batch:
        spans: list[Span] = [(offset, 0, key, False, 0, 0, 0) for offset, key in enumerate(keys)]
        offset_map.put_records(0, spans, 0)
        put = [
            (key, offset) for offset, key in enumerate(keys) if offset <= offset_map.latest_offset
        ]
    else:
        for offset, key in enumerate(keys):
            try:
                offset_map.put(key, offset)
            except OffsetMapFullError:
                continue
            put.append((key, offset))
    for index, base in enumerate(bases):
        upper = bases[index + 1] if index + 1 < len(bases) else 1 << 62
        lost = any(base <= o < upper and offset_map.get(k) != o for k, o in put)
        assert offset_map.superseded(index) == lost
    offset_map.clear()
    offset_map.watch(bases)
    assert not any(offset_map.superseded(i) for i in range(len(bases)))
