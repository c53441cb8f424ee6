"""replog.common.frozen_init: the faster `__init__` builds the same instances the generated one
did, and refuses classes it cannot build."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from dataclasses import dataclass, field
from uuid import uuid4

import pytest

from replog.common.frozen_init import fast_frozen_init
from replog.replication.leader_state import FollowerFetchUpdate
from replog.replication.messages import FetchPartition, FetchPartitionResult
from replog.server.data_plane.producer_state_loader import PreloadedTable
from replog.server.data_plane.repeat_reads import EmptyRead

_SENTINEL = object()


def _pair() -> tuple[type, type]:
    """The same frozen slotted dataclass twice: as generated, and with `fast_frozen_init`."""

    def make() -> type:
        @dataclass(frozen=True, slots=True)
        class Point:
            x: int
            y: int = 2
            tag: object = _SENTINEL

        return Point

    return make(), fast_frozen_init(make())


def test_instances_match_the_generated_init() -> None:
    plain, fast = _pair()
    assert fast.__init__ is not plain.__init__
    assert inspect.signature(fast.__init__) == inspect.signature(plain.__init__)
    for args, kwargs in [((1,), {}), ((1, 3), {}), ((), {"x": 1, "tag": None}), ((1,), {"y": 5})]:
        a, b = plain(*args, **kwargs), fast(*args, **kwargs)
        assert (a.x, a.y, a.tag) == (b.x, b.y, b.tag)
        assert repr(a).split("(", 1)[1] == repr(b).split("(", 1)[1]
    point = fast(1)
    assert point.tag is _SENTINEL  # the default object itself
    assert point == fast(1, 2) and hash(point) == hash(fast(1, 2))
    assert dataclasses.replace(point, y=7) == fast(1, 7)
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        fast()  # the same missing-argument error as the generated one
    with pytest.raises(TypeError):
        fast(1, 2, 3, 4)
    with pytest.raises(TypeError):
        fast(1, z=3)


@pytest.mark.parametrize(
    "cls", [FetchPartition, FetchPartitionResult, EmptyRead, FollowerFetchUpdate, PreloadedTable]
)
def test_the_hot_classes_have_it(cls: type) -> None:
    """The classes built per partition of a fetch round or per new replica."""
    assert cls.__init__.__code__.co_filename == "<string>"
    assert "_set_" in " ".join(cls.__init__.__code__.co_names)


def test_a_fetch_result_round_trips() -> None:
    result = FetchPartitionResult("t", 3, high_watermark=5, records=b"ab", topic_id=uuid4())
    assert pickle.loads(pickle.dumps(result)) == result
    assert result.last_stable_offset == -1 and result.region is None
    assert result.records_size == 2


@pytest.mark.parametrize(
    "make",
    [
        lambda: dataclass(frozen=True)(type("NoSlots", (), {"__annotations__": {"x": "int"}})),
        lambda: dataclass(slots=True)(type("NotFrozen", (), {"__annotations__": {"x": "int"}})),
    ],
)
def test_refuses_what_is_not_frozen_and_slotted(make: object) -> None:
    with pytest.raises(TypeError):
        fast_frozen_init(make())  # type: ignore[operator]


def test_refuses_fields_it_would_build_wrongly() -> None:
    @dataclass(frozen=True, slots=True)
    class Factory:
        x: list[int] = field(default_factory=list)

    @dataclass(frozen=True, slots=True)
    class Computed:
        x: int
        y: int = field(init=False, default=0)

    @dataclass(frozen=True, slots=True)
    class KeywordOnly:
        x: int = field(kw_only=True)

    @dataclass(frozen=True, slots=True)
    class PostInit:
        x: int

        def __post_init__(self) -> None:
            pass

    for cls in (Factory, Computed, KeywordOnly, PostInit):
        with pytest.raises(TypeError):
            fast_frozen_init(cls)
