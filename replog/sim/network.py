"""`SimNetwork`: the simulated network between a simulation's nodes, on its `VirtualLoop`.

Every message is delivered by a timer of the loop after a seeded delay, so messages between
two nodes overtake each other whenever their delays say so (reordering). With faults on, a
message may be dropped or delivered twice, and a partition (`partition`, `heal`) cuts every
link between two groups. A node that is down (`down`, until `up`) receives nothing.

Rules:
- Every random choice comes from the network's own `random.Random`, in the order messages are
  sent: with the same seed and the same sends, the same deliveries at the same virtual times.
- A sender hears of a lost request as a real transport would tell it: `on_lost(unreachable)`
  after a delay, `unreachable` True when the destination is down (a refused connection, one
  delay later), False when the message was dropped or cut (its request timeout later; and
  only sometimes, since a real deadline's report can be late or lost too, and a node must
  not depend on it). A lost message with no `on_lost` (an answer) vanishes.
- A call (`call`: a request and its answer, as a gRPC unary call) goes out and comes back as
  two messages, each delayed, dropped or cut on its own; the caller's deadline ends it
  (`CallLost`, not `unreachable`) when either is lost, and a destination that is down refuses
  it one delay later (`CallLost`, `unreachable`). The destination serves it with the
  `serve` it was given (None: down) as soon as it arrives, even when the caller gave up.
- The network never looks inside a message: what to send and what a loss means is the
  link's (`raft_link` for the Raft quorum, `controller_link` for calls to controllers).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from replog.sim.virtual_loop import VirtualLoop

__all__ = ["CallLost", "NetworkFaults", "SimNetwork"]

R = TypeVar("R")

Deliver = Callable[[object], None]
OnLost = Callable[[bool], None]


@dataclass(frozen=True, slots=True)
class NetworkFaults:
    """How the network misbehaves; the defaults are a healthy network."""

    delay_ms_min: int = 1
    delay_ms_max: int = 5
    drop_rate: float = 0.0
    duplicate_rate: float = 0.0
    # The chance that a sender hears of its dropped request (`on_lost`) at its timeout.
    lost_report_rate: float = 0.5

    def __post_init__(self) -> None:
        if not 0 <= self.delay_ms_min <= self.delay_ms_max:
            raise ValueError(
                f"delays must be 0 <= min <= max, not {self.delay_ms_min}..{self.delay_ms_max}"
            )
        for name in ("drop_rate", "duplicate_rate", "lost_report_rate"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], not {getattr(self, name)}")


class CallLost(Exception):
    """A call got no answer: its destination refused it (`unreachable`, it is down) or its
    deadline passed."""

    def __init__(self, destination: int, *, unreachable: bool) -> None:
        self.destination = destination
        self.unreachable = unreachable
        super().__init__(
            f"node {destination} is down" if unreachable else f"no answer from node {destination}"
        )


class SimNetwork:
    """Seeded message passing between nodes (module docstring)."""

    def __init__(
        self, loop: VirtualLoop, rng: random.Random, faults: NetworkFaults | None = None
    ) -> None:
        self._loop = loop
        self._rng = rng
        self.faults = faults or NetworkFaults()
        # `delay_ms`'s draw: `randint(delay_ms_min, delay_ms_max)` is `delay_ms_min` plus the
        # first `getrandbits(bits)` below `width`.
        self._delay_width = self.faults.delay_ms_max - self.faults.delay_ms_min + 1
        self._delay_bits = self._delay_width.bit_length()
        self._nodes: dict[int, Deliver] = {}
        self._group_of: dict[int, int] = {}  # node -> its partition group; empty: no partition
        self.sent = 0
        self.delivered = 0
        self.dropped = 0

    # --- membership ---------------------------------------------------------------------------

    def up(self, node_id: int, deliver: Deliver) -> None:
        """`node_id` listens: what reaches it from now on goes to `deliver`."""
        self._nodes[node_id] = deliver

    def down(self, node_id: int) -> None:
        """`node_id` is down: messages in flight to it are lost on arrival."""
        self._nodes.pop(node_id, None)

    def now_s(self) -> float:
        """The network's clock: its loop's virtual time, in seconds."""
        return self._loop.time()

    def is_up(self, node_id: int) -> bool:
        return node_id in self._nodes

    def partition(self, groups: Iterable[Iterable[int]]) -> None:
        """Cut every link between two of `groups`; a node in none is cut from all of them."""
        self._group_of = {node: index for index, group in enumerate(groups) for node in group}

    def heal(self) -> None:
        self._group_of = {}

    def cut(self, source: int, destination: int) -> bool:
        if not self._group_of:
            return False
        return self._group_of.get(source, -1 - source) != self._group_of.get(
            destination, -1 - destination
        )

    # --- sending ------------------------------------------------------------------------------

    def send(
        self,
        source: int,
        destination: int,
        message: object,
        *,
        on_lost: OnLost | None = None,
        timeout_ms: int = 0,
    ) -> None:
        """Send `message` (module Rules); `timeout_ms`: when the sender would give up on it."""
        self.sent += 1
        faults = self.faults
        rng = self._rng
        if self.cut(source, destination) or (faults.drop_rate and rng.random() < faults.drop_rate):
            self.dropped += 1
            if on_lost is not None and rng.random() < faults.lost_report_rate:
                self._loop.call_later(timeout_ms / 1000, on_lost, False)
            return
        copies = 2 if faults.duplicate_rate and rng.random() < faults.duplicate_rate else 1
        for _ in range(copies):
            delay_ms = self.delay_ms()
            self._loop.call_later(delay_ms / 1000, self._arrive, destination, message, on_lost)

    def _arrive(self, destination: int, message: object, on_lost: OnLost | None) -> None:
        deliver = self._nodes.get(destination)
        if deliver is None:
            self.dropped += 1
            if on_lost is not None:  # nobody listens: the connection is refused
                delay_ms = self.delay_ms()
                self._loop.call_later(delay_ms / 1000, on_lost, True)
            return
        self.delivered += 1
        deliver(message)

    def delay_ms(self) -> int:
        """A message's delay: `rng.randint(delay_ms_min, delay_ms_max)`, drawn as `randint`
        draws it (the same bits of the same stream: runs stay the same) without its three
        Python calls; every message draws one."""
        getrandbits, width, bits = self._rng.getrandbits, self._delay_width, self._delay_bits
        drawn = getrandbits(bits)
        while drawn >= width:
            drawn = getrandbits(bits)
        return self.faults.delay_ms_min + drawn

    # --- calls --------------------------------------------------------------------------------

    async def call(
        self,
        source: int,
        destination: int,
        serve: Callable[[], Awaitable[R]] | None,
        *,
        timeout_s: float,
    ) -> R:
        """A request to `destination` served by `serve` there, and its answer (module Rules)."""
        loop = self._loop
        answer: asyncio.Future[R] = loop.create_future()
        deadline = loop.call_later(
            timeout_s, _settle_lost, answer, CallLost(destination, unreachable=False)
        )

        def arrived() -> None:
            if serve is None:
                delay_ms = self.delay_ms()
                loop.call_later(
                    delay_ms / 1000, _settle_lost, answer, CallLost(destination, unreachable=True)
                )
                return
            served = asyncio.ensure_future(serve())
            served.add_done_callback(answered)

        def answered(served: asyncio.Future[R]) -> None:
            if served.cancelled():
                return  # the simulation is ending
            if self._lost(destination, source):
                served.exception()  # retrieved: a lost answer is not an unhandled error
                return
            delay_ms = self.delay_ms()
            loop.call_later(delay_ms / 1000, _settle, answer, served)

        self.sent += 1
        if self._lost(source, destination):
            self.dropped += 1
        else:
            delay_ms = self.delay_ms()
            loop.call_later(delay_ms / 1000, arrived)
        try:
            return await answer
        finally:
            deadline.cancel()

    def _lost(self, source: int, destination: int) -> bool:
        drop = self.faults.drop_rate
        return self.cut(source, destination) or bool(drop and self._rng.random() < drop)


def _settle_lost(answer: asyncio.Future[R], error: CallLost) -> None:
    if not answer.done():
        answer.set_exception(error)


def _settle(answer: asyncio.Future[R], served: asyncio.Future[R]) -> None:
    if served.cancelled():
        return
    if answer.done():
        served.exception()  # retrieved: the caller gave up on it
        return
    error = served.exception()
    if error is not None:
        answer.set_exception(error)
    else:
        answer.set_result(served.result())
