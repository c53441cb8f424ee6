"""`FaultMix`: the fault kinds a seed enables (swarm testing). The full mix draws each fault at
its `FAULT_WEIGHTS` share, a mix without a kind never draws its faults and gives its share to
the others in proportion, the seeds' mixes vary (some without each kind, a quarter with
every kind), and a run does only what its mix enables."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from replog.sim.fault_mix import (
    ALL_FAULTS,
    FAULT_KINDS,
    FAULT_WEIGHTS,
    START_WEIGHT,
    FaultMix,
)
from replog.sim.run import simulate

ROLLS = [i / 10_000 for i in range(10_000)]


def _shares(mix: FaultMix) -> Counter[str]:
    return Counter(mix.draw(roll) for roll in ROLLS)


def test_the_full_mix_draws_each_fault_at_its_weight() -> None:
    shares = _shares(ALL_FAULTS)
    assert shares == Counter({fault: weight * 100 for fault, weight in FAULT_WEIGHTS}) + Counter(
        {"start": START_WEIGHT * 100}
    )


def test_a_left_out_kind_is_never_drawn_and_the_others_share_its_draws() -> None:
    mix = FaultMix(frozenset({"kills", "clock jumps"}))
    shares = _shares(mix)
    total = 15 + 3 + START_WEIGHT
    assert set(shares) == {"kill", "clock", "start"}
    assert shares["kill"] == pytest.approx(len(ROLLS) * 15 / total, abs=1)
    assert shares["clock"] == pytest.approx(len(ROLLS) * 3 / total, abs=1)
    assert Counter(FaultMix(frozenset()).draw(roll) for roll in ROLLS) == {"start": len(ROLLS)}


def test_an_unknown_kind_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'meteor'"):
        FaultMix(frozenset({"kills", "meteor"}))


def test_the_seeds_mixes_vary() -> None:
    mixes = [FaultMix.from_seed(random.Random(seed)) for seed in range(400)]
    full = sum(mix == ALL_FAULTS for mix in mixes)
    assert 0.2 < full / len(mixes) < 0.35
    for kind in FAULT_KINDS:
        without = sum(kind not in mix.kinds for mix in mixes)
        assert 0.3 < without / len(mixes) < 0.45, kind
    assert len(set(mixes)) > 40
    assert ALL_FAULTS.describe() == "every fault kind"
    assert FaultMix(frozenset({"kills"})).describe() == "faults: kills"


def test_a_run_does_only_what_its_mix_enables() -> None:
    counted = {
        "partitions": lambda r: r.partitions,
        "kills": lambda r: r.kills,
        "clean restarts": lambda r: r.clean_restarts,
        "power losses": lambda r: r.power_losses,
        "disk faults": lambda r: r.disk_errors + r.full_disks + r.slow_disks,
        "clock jumps": lambda r: r.clock_jumps,
    }
    left_out = 0
    for seed in range(4):
        report = simulate(seed)
        for kind, count in counted.items():
            if kind not in report.fault_mix.kinds:
                left_out += 1
                assert count(report) == 0, (seed, kind)
        assert report.fault_mix.describe() in report.summary()
    assert left_out > 0
