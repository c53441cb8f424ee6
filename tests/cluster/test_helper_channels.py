"""gRPC channels give a connection attempt the time a node on a loaded machine may take to
answer it, and a call its own timeout: a node whose process does not run for a moment (the
kernel accepts its connections, nothing sends the HTTP/2 SETTINGS frame yet) is waited for, not
taken for unreachable after 100 ms. Replog's channels between nodes and the admin client's
(`replog.wire.grpc_reconnect`), and the cluster tests' own (`cluster_helpers.CHANNEL_OPTIONS`)."""

from __future__ import annotations

import socket
from typing import Any

import grpc
import pytest
from cluster_helpers import CHANNEL_OPTIONS

from replog.pb import raft_pb2 as pb
from replog.pb import raft_pb2_grpc
from replog.wire.grpc_reconnect import RECONNECT_OPTIONS


@pytest.mark.parametrize(
    "options", [RECONNECT_OPTIONS, CHANNEL_OPTIONS], ids=["replog's", "the cluster tests'"]
)
def test_a_node_slow_to_answer_a_new_connection_is_waited_for_until_the_calls_timeout(
    options: list[tuple[str, Any]],
) -> None:
    with socket.socket() as silent:  # accepts (the kernel does), never speaks HTTP/2
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        with grpc.insecure_channel(address, options=options) as channel:
            stub = raft_pb2_grpc.MetadataLogStub(channel)  # type: ignore[no-untyped-call]
            with pytest.raises(grpc.RpcError) as failed:
                stub.ReadCommitted(pb.ReadCommittedRequest(start_offset=0), timeout=1.0)
    error = failed.value
    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED, error.details()
