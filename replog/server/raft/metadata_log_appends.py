"""The rules of a raw append to the metadata log, in one place for both of its shells: gRPC
`MetadataLog.Append` (`raft_service`) and the metadata append listener
(`metadata_append_server`). Each shell only translates bytes to values and the answer back.

Rules:
- Raw values only where no controller runs (`metadata.log.raw.append.enable=true`): where the
  controller runs, every record of the log must be a metadata record it wrote, so an append is
  refused with INVALID_REQUEST naming the setting.
- An append carries at least one value (INVALID_REQUEST otherwise).
- Leader only: elsewhere NOT_LEADER_OR_FOLLOWER, its message naming the leader if this node
  knows it, and the answer carrying that leader's id (-1: unknown) and the quorum epoch, so a
  caller can go there.
- Answered once committed, with the values' offsets and the epoch; any other Kafka error (not
  committed in time, a batch over the limit, a failed disk) as its code and message.
"""

from __future__ import annotations

from replog.errors import InvalidRequestError, KafkaError, NotLeaderOrFollowerError
from replog.pb import raft_pb2 as pb
from replog.server.raft import metadata_append_wire as wire
from replog.server.raft.raft_driver import RaftDriver


class MetadataLogAppends:
    """Raw appends to one node's metadata log; see the module rules."""

    def __init__(self, driver: RaftDriver, *, raw_appends: bool) -> None:
        self._driver = driver
        self._raw_appends = raw_appends

    async def append(self, values: list[bytes]) -> pb.AppendResponse:
        """The answer to an append of `values`, once committed or refused (module rules)."""
        driver = self._driver
        if not self._raw_appends:
            return wire.refusal(
                InvalidRequestError(
                    f"node {driver.node_id}: the metadata log is written only by the quorum "
                    "controller; raw appends need metadata.log.raw.append.enable=true"
                )
            )
        if not values:
            return wire.refusal(InvalidRequestError("an append needs at least one value"))
        try:
            result = await driver.append_and_wait(values)
        except NotLeaderOrFollowerError as exc:
            status = driver.status()
            leader = wire.NONE if status.leader_id is None else status.leader_id
            return wire.refusal(exc, leader, status.quorum_epoch)
        except KafkaError as exc:
            return wire.refusal(exc)
        return pb.AppendResponse(
            leader_id=driver.node_id,
            quorum_epoch=result.quorum_epoch,
            base_offset=result.base_offset,
            last_offset=result.last_offset,
        )
