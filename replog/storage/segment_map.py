"""A log's segments by base offset, in offset order: the part of a sorted dict a `Log` uses.

Why not `sortedcontainers.SortedDict`: making one costs some 20 objects the garbage collector
tracks (a `SortedList`, its lists and 14 bound methods cached per instance) and 5-8 µs, the
largest single cost of the Python that creates a new replica's log in a bulk thread (a fifth
of that thread's samples while it held the GIL, creating 10,000 partitions). A log holds a
handful of segments, and a new one is added after the last (a roll) nearly always.

Rules:
- The dict's order is the offset order: a key added after the last is appended; one added
  before it (loading out of order, a truncation's new segment) rebuilds the dict in order,
  so `values()` and `items()` are the dict's own views, in offset order.
- `irange` returns an iterator over a copy of the keys in range: the caller may change the
  map while it walks them.
"""

from __future__ import annotations

import bisect
from collections.abc import ItemsView, Iterator, ValuesView
from typing import Generic, TypeVar

V = TypeVar("V")


class SegmentMap(Generic[V]):
    """Base offset -> segment, in offset order (module Rules)."""

    __slots__ = ("_bases", "_by_base")

    def __init__(self) -> None:
        self._by_base: dict[int, V] = {}
        self._bases: list[int] = []  # the keys, sorted, for bisection

    @classmethod
    def of_one(cls, base: int, value: V) -> SegmentMap[V]:
        """A map holding one segment (a new log's)."""
        made = cls()
        made._by_base[base] = value
        made._bases.append(base)
        return made

    def __len__(self) -> int:
        return len(self._bases)

    def __contains__(self, base: object) -> bool:
        return base in self._by_base

    def __iter__(self) -> Iterator[int]:
        return iter(self._by_base)

    def __getitem__(self, base: int) -> V:
        return self._by_base[base]

    def get(self, base: int) -> V | None:
        return self._by_base.get(base)

    def __setitem__(self, base: int, value: V) -> None:
        by_base, bases = self._by_base, self._bases
        if base in by_base:
            by_base[base] = value
        elif not bases or base > bases[-1]:
            by_base[base] = value
            bases.append(base)
        else:
            bisect.insort(bases, base)
            by_base[base] = value
            self._by_base = {b: by_base[b] for b in bases}

    def __delitem__(self, base: int) -> None:
        del self._by_base[base]
        del self._bases[bisect.bisect_left(self._bases, base)]

    def pop(self, base: int) -> V:
        """Remove `base` and return its segment; KeyError if there is none."""
        value = self._by_base[base]
        del self[base]
        return value

    def clear(self) -> None:
        self._by_base.clear()
        self._bases.clear()

    def values(self) -> ValuesView[V]:
        return self._by_base.values()

    def items(self) -> ItemsView[int, V]:
        return self._by_base.items()

    def peekitem(self, index: int) -> tuple[int, V]:
        """The (base, segment) at `index` in offset order (-1: the last); IndexError if none."""
        base = self._bases[index]
        return base, self._by_base[base]

    def bisect_right(self, offset: int) -> int:
        """How many bases are <= `offset`."""
        return bisect.bisect_right(self._bases, offset)

    def irange(
        self, minimum: int | None = None, maximum: int | None = None, *, reverse: bool = False
    ) -> Iterator[int]:
        """The bases from `minimum` to `maximum`, both included (None: unbounded), in offset
        order or, with `reverse`, the other way."""
        bases = self._bases
        low = 0 if minimum is None else bisect.bisect_left(bases, minimum)
        high = len(bases) if maximum is None else bisect.bisect_right(bases, maximum)
        chosen = bases[low:high]
        return reversed(chosen) if reverse else iter(chosen)

    def __repr__(self) -> str:
        return f"SegmentMap({self._by_base!r})"
