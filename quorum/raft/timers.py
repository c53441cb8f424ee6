"""Randomised Raft timers: the election timeout and the election backoff.

Rules:
- An election timeout is uniform in [T, 2T) for the configured T, so that two voters that
  timed out together rarely campaign together again.
- After a lost (or timed-out) election the candidate backs off for
  min(base x uniform[0, 2^(min(20, retries - 1) + 1)), backoff_max): a randomised binary
  exponential backoff that grows with each consecutive failed election.
- Randomness comes only from the injected `RandomSource` (a seeded `random.Random` in tests), so
  a simulation run is a function of its seed.
"""

from __future__ import annotations

from typing import Protocol


class RandomSource(Protocol):
    """What the core needs from `random.Random`."""

    def randrange(self, start: int, stop: int) -> int: ...


def election_timeout_ms(rng: RandomSource, election_timeout_ms_base: int) -> int:
    """A timeout uniform in [T, 2T)."""
    return election_timeout_ms_base + rng.randrange(0, election_timeout_ms_base)


def election_backoff_ms(
    rng: RandomSource, retries: int, backoff_ms_base: int, backoff_ms_max: int
) -> int:
    """The backoff after `retries` consecutive failed elections (retries >= 1)."""
    assert retries >= 1, retries
    slots = 1 << (min(20, retries - 1) + 1)
    return min(backoff_ms_base * rng.randrange(0, slots), backoff_ms_max)
