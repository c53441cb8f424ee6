"""Which quorum peers this node has been failing to reach, said once it lasts.

Raft retries a failed request on its own timers and logs nothing per attempt (a peer that is
down is normal for a while). A peer failing for `WARN_AFTER_S` or more is not: the node says so
once at WARNING, with the last error, and says again at INFO when the peer answers. A node
that cannot elect a leader thus says which peers it cannot reach and why, instead of waiting
in silence.

Pure: the caller passes the time and logs what it is given back.
"""

from __future__ import annotations

from dataclasses import dataclass

WARN_AFTER_S = 5.0


@dataclass
class _Failing:
    since_s: float
    error: str
    warned: bool = False


class PeerFailures:
    """The peers failing now, since when, and whether that was said (module docstring)."""

    def __init__(self, node_id: int, warn_after_s: float = WARN_AFTER_S) -> None:
        self._node_id = node_id
        self._warn_after_s = warn_after_s
        self._failing: dict[int, _Failing] = {}

    def __contains__(self, peer_id: int) -> bool:
        """Whether requests to `peer_id` are failing now."""
        return peer_id in self._failing

    def failed(self, peer_id: int, error: str, now_s: float) -> str | None:
        """A request to `peer_id` failed with `error`: the warning to log, once the peer has
        been failing for `warn_after_s`, else None."""
        failing = self._failing.get(peer_id)
        if failing is None:
            self._failing[peer_id] = _Failing(now_s, error)
            return None
        failing.error = error
        if failing.warned or now_s - failing.since_s < self._warn_after_s:
            return None
        failing.warned = True
        return (
            f"node {self._node_id}: quorum peer {peer_id} unreachable for "
            f"{now_s - failing.since_s:.0f} s (retrying): {error}"
        )

    def answered(self, peer_id: int, now_s: float) -> str | None:
        """`peer_id` answered: the line to log at INFO if its failure had been said."""
        failing = self._failing.pop(peer_id, None)
        if failing is None or not failing.warned:
            return None
        return (
            f"node {self._node_id}: quorum peer {peer_id} reachable again after "
            f"{now_s - failing.since_s:.0f} s"
        )
