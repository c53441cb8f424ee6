"""Ports for local clusters in tests: one process's answers never overlap before they are bound,
and two xdist workers pick from disjoint stripes."""

from __future__ import annotations

import pytest

from replog.errors import ReplogError
from replog.testing import free_base_port
from tests.local_ports import CLUSTER_PORTS, worker_stripe


def _ports(base: int, count: int, offsets: tuple[int, ...]) -> set[int]:
    return {base + offset + i for offset in (0, *offsets) for i in range(count)}


def test_two_answers_in_a_row_never_share_a_port_though_neither_was_bound() -> None:
    # A window of 27 bases for 3 ports at 0/+100/+200: two unremembered random picks share a
    # port about one time in six, so 30 windows would all but surely show one.
    offsets = (100, 200)
    for window in range(30):
        low = 11_000 + window * 300
        first = free_base_port(3, offsets=offsets, within=(low, low + 230))
        second = free_base_port(3, offsets=offsets, within=(low, low + 230))
        assert not _ports(first, 3, offsets) & _ports(second, 3, offsets), (first, second)


def test_a_window_with_no_room_for_the_ports_is_a_typed_error_naming_it() -> None:
    with pytest.raises(ReplogError, match=r"no room for 3 ports .* in \(20000, 20100\)"):
        free_base_port(3, offsets=(100,), within=(20_000, 20_100))


def test_each_xdist_worker_picks_from_its_own_stripe() -> None:
    environ = {"PYTEST_XDIST_WORKER_COUNT": "2"}
    first = worker_stripe({**environ, "PYTEST_XDIST_WORKER": "gw0"})
    second = worker_stripe({**environ, "PYTEST_XDIST_WORKER": "gw1"})
    assert first[1] <= second[0]
    assert CLUSTER_PORTS[0] == first[0] and second[1] <= CLUSTER_PORTS[1]
    assert worker_stripe({}) == CLUSTER_PORTS
