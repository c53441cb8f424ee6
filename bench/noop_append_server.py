"""A Python gRPC server whose MetadataLog.Append does nothing: the ceiling of one Python gRPC
call per proposal on this machine, which bench/raft_commit.py measures next to the real systems.

    python -P bench/noop_append_server.py PORT

It answers every Append at once with offsets that mean nothing: no Raft, no disk, no peers.
"""

from __future__ import annotations

import asyncio
import sys

import grpc

from replog.pb import raft_pb2 as pb
from replog.pb import raft_pb2_grpc


class NoOpMetadataLog(raft_pb2_grpc.MetadataLogServicer):
    async def Append(self, request: pb.AppendRequest, context: object) -> pb.AppendResponse:
        return pb.AppendResponse(leader_id=1, quorum_epoch=1, base_offset=0, last_offset=0)


async def serve(port: int) -> None:
    server = grpc.aio.server()
    raft_pb2_grpc.add_MetadataLogServicer_to_server(NoOpMetadataLog(), server)  # type: ignore[no-untyped-call]
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1])))
