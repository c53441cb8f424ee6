"""`SimNetwork.delay_ms`: a message's delay is drawn as `random.randint` draws it, bit for bit,
so that a seed's run does not depend on which of the two draws it."""

from __future__ import annotations

import random

import pytest

from replog.sim.network import NetworkFaults, SimNetwork
from replog.sim.virtual_loop import VirtualLoop


@pytest.mark.parametrize("low, high", [(0, 2), (0, 10), (0, 40), (1, 5), (3, 3), (0, 0), (7, 64)])
def test_delays_are_randints_of_the_same_stream(low: int, high: int) -> None:
    loop = VirtualLoop()
    try:
        network = SimNetwork(loop, random.Random(79), NetworkFaults(low, high))
        expected = random.Random(79)
        drawn = [network.delay_ms() for _ in range(5_000)]
        assert drawn == [expected.randint(low, high) for _ in range(5_000)]
        assert network._rng.getstate() == expected.getstate()  # the stream goes on alike
    finally:
        loop.close()
