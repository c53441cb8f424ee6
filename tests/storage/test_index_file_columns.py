"""Index files written and read column by column (replog/storage/index_file.py): the bytes are
exactly what one `struct` pack per entry gives, loading gives back every entry, and every
defect the per-entry checks found is still found."""

from __future__ import annotations

import struct
from array import array
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.errors import CorruptIndexError
from replog.storage.fs import OsFileSystem
from replog.storage.index_file import (
    INT32,
    INT64,
    OffsetIndex,
    TimeIndex,
    columns_from_entries,
    entries_from_columns,
    first_out_of_order,
)

BASE = 5_000_000_000  # beyond int32: relative fields must be relative to it
INT32_MAX = 2**31 - 1

int32s = st.integers(-(2**31), INT32_MAX)
int64s = st.integers(-(2**63), 2**63 - 1)


@given(st.lists(st.tuples(int64s, int32s), max_size=300))
def test_entries_are_what_struct_packs_and_read_back(pairs: list[tuple[int, int]]) -> None:
    first = array(INT64, [a for a, _ in pairs])
    second = array(INT32, [b for _, b in pairs])
    raw = bytes(entries_from_columns((first, second)))
    assert raw == b"".join(struct.pack(">qi", a, b) for a, b in pairs)
    assert list(first) == [a for a, _ in pairs]  # the caller's columns are left as they were
    back = columns_from_entries(raw, (INT64, INT32))
    assert [list(column) for column in back] == [list(first), list(second)]


def test_columns_of_unequal_length_or_partial_entries_are_refused() -> None:
    with pytest.raises(ValueError, match="columns of 2 and 1 items"):
        entries_from_columns((array(INT32, [1, 2]), array(INT32, [3])))
    with pytest.raises(ValueError, match="not whole 8-byte entries"):
        columns_from_entries(b"\0" * 12, (INT32, INT32))


@given(st.lists(st.integers(-5, 5), max_size=30))
def test_first_out_of_order_is_the_first_step_back(items: list[int]) -> None:
    column = array(INT64, items)
    for strict in (True, False):
        bad = [
            i
            for i in range(1, len(items))
            if (items[i] <= items[i - 1] if strict else items[i] < items[i - 1])
        ]
        assert first_out_of_order(column, strict=strict) == (bad[0] if bad else None)


def offset_entries(gaps: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Strictly increasing (absolute offset, position) entries from positive gaps."""
    entries, offset, position = [], BASE, 0
    for offset_gap, position_gap in gaps:
        offset += offset_gap
        position += position_gap
        entries.append((offset, position))
    return entries


def written_then_loaded(
    kind: type[OffsetIndex] | type[TimeIndex], path: str, entries: list[tuple[int, int]]
) -> tuple[bytes, OffsetIndex | TimeIndex]:
    """(the file's bytes, a fresh index loaded from it) after appending `entries` and flushing."""
    index = kind(path, BASE, 1_000_000, OsFileSystem())
    index.reset()
    for key, value in entries:
        if isinstance(index, OffsetIndex):
            index.append(key, value)
        else:
            index.maybe_append(key, value)
    index.flush(fsync=False)
    loaded = kind(path, BASE, 1_000_000, OsFileSystem())
    loaded.load(2**31 - 1)
    return Path(path).read_bytes(), loaded


gaps = st.lists(st.tuples(st.integers(1, 10_000), st.integers(1, 100_000)), max_size=200)


@settings(max_examples=50)
@given(gaps=gaps)
def test_offset_index_round_trips_through_kafkas_layout(
    tmp_path_factory: pytest.TempPathFactory, gaps: list[tuple[int, int]]
) -> None:
    path = str(tmp_path_factory.mktemp("ix") / "a.index")
    entries = offset_entries(gaps)
    written, loaded = written_then_loaded(OffsetIndex, path, entries)
    assert written == b"".join(
        struct.pack(">ii", offset - BASE, position) for offset, position in entries
    )
    assert loaded.entries() == entries
    assert isinstance(loaded, OffsetIndex)
    if entries:
        middle = entries[len(entries) // 2]
        assert loaded.lookup(middle[0]) == middle
        below = [entry for entry in entries if entry[0] <= middle[0] - 1]
        assert loaded.lookup(middle[0] - 1) == (below[-1] if below else (BASE, 0))
        assert loaded.floor_entry_by_position(middle[1]) == middle
        assert loaded.ceiling_entry(middle[0]) == middle
        loaded.truncate_to(middle[0])
        assert loaded.entries() == entries[: len(entries) // 2]


@settings(max_examples=50)
@given(gaps=gaps, timestamp0=st.integers(0, 2**62))
def test_time_index_round_trips_through_kafkas_layout(
    tmp_path_factory: pytest.TempPathFactory, gaps: list[tuple[int, int]], timestamp0: int
) -> None:
    path = str(tmp_path_factory.mktemp("ix") / "a.timeindex")
    entries = [(timestamp0 + position, offset) for offset, position in offset_entries(gaps)]
    written, loaded = written_then_loaded(TimeIndex, path, entries)
    assert written == b"".join(
        struct.pack(">qi", timestamp, offset - BASE) for timestamp, offset in entries
    )
    assert loaded.entries() == entries
    if entries:
        middle = entries[len(entries) // 2]
        assert loaded.lookup(middle[0]) == middle
        loaded.truncate_to(middle[1])
        assert loaded.entries() == entries[: len(entries) // 2]


def test_appends_after_a_load_go_on_where_the_file_ended(tmp_path: Path) -> None:
    path = str(tmp_path / "a.index")
    index = OffsetIndex(path, BASE, 100, OsFileSystem())
    index.reset()
    index.append(BASE + 3, 0)
    index.flush(fsync=False)
    loaded = OffsetIndex(path, BASE, 100, OsFileSystem())
    loaded.load(1000)
    loaded.append(BASE + 9, 500)
    loaded.flush(fsync=False)
    assert Path(path).read_bytes() == struct.pack(">iiii", 3, 0, 9, 500)


@pytest.mark.parametrize(
    ("layout", "entries", "message"),
    [
        (">ii", [(1, 0), (1, 10)], "entry 1 key 5000000001 does not increase past 5000000001"),
        (">ii", [(2, 0), (1, 10)], "entry 1 key 5000000001 does not increase past 5000000002"),
        (">ii", [(1, 10), (2, 10)], "position of entry 1 does not increase"),
        (">ii", [(-1, 0), (2, 10)], r"negative entry \(relative offset -1, position 0\)"),
        (">ii", [(1, -4), (2, 10)], r"negative entry \(relative offset 1, position -4\)"),
        (">ii", [(1, 0), (2, 99)], "last position 99 is beyond the log's 99 bytes"),
        (">qi", [(7, 1), (8, 0)], "offset of entry 1 goes backwards"),
        (">qi", [(7, -1), (8, 0)], "negative relative offset -1"),
        (">qi", [(8, 1), (7, 2)], "entry 1 key 7 does not increase past 8"),
    ],
)
def test_damaged_entries_are_named(
    tmp_path: Path, layout: str, entries: list[tuple[int, int]], message: str
) -> None:
    suffix, kind = (".index", OffsetIndex) if layout == ">ii" else (".timeindex", TimeIndex)
    path = tmp_path / f"a{suffix}"
    path.write_bytes(b"".join(struct.pack(layout, *entry) for entry in entries))
    index = kind(str(path), BASE, 100, OsFileSystem())
    with pytest.raises(CorruptIndexError, match=message) as caught:
        index.load(99)
    assert str(path) in str(caught.value)
