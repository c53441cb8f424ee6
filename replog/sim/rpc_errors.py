"""How a simulated gRPC call fails: the `grpc.aio.AioRpcError` a real call would raise, so that
the shells on either side handle it as they handle a real one."""

from __future__ import annotations

import grpc

from replog.sim.network import CallLost

__all__ = ["lost_call_error", "rpc_error"]


def rpc_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    """The error of a call that ended with status `code`."""
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)


def lost_call_error(lost: CallLost) -> grpc.aio.AioRpcError:
    """A call the network lost: UNAVAILABLE when its destination is down (a refused
    connection), DEADLINE_EXCEEDED when no answer came in time."""
    code = grpc.StatusCode.UNAVAILABLE if lost.unreachable else grpc.StatusCode.DEADLINE_EXCEEDED
    return rpc_error(code, str(lost))
