"""An in-process fake of the Controller gRPC service whose answers each test scripts.

`FakeController(node_id)` serves every RPC of `controller.proto` on 127.0.0.1 (a free port),
in a gRPC server thread pool. Per RPC, a test scripts a list of answers, used in order (the
last one repeats); without a script an RPC answers an empty response naming `controller_id`.
An answer is a response message, a callable `request -> response`, `Abort(code, details)` (a
gRPC status instead of a response) or `HANG` (no answer until the client gives up or the fake
stops). Every request is recorded, and so is every call the client cancelled.

Imported by module name (`import fake_controller`): pytest puts this folder on `sys.path` for
the tests in it, and `tests/cli/conftest.py` adds it for the CLI tests. Run as a script
(`python fake_controller.py PORT`), it serves unscripted answers on PORT in a process of its
own, says "serving" on stdout once its server has started, and stops when stdin closes.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import grpc

from replog.errors import NotControllerError, error_for_code
from replog.pb import common_pb2
from replog.pb import controller_pb2 as pb

SERVICE = pb.DESCRIPTOR.services_by_name["Controller"]
RPCS = [method.name for method in SERVICE.methods]
HANG_LIMIT_S = 10.0  # a hung handler gives up by itself after this, whatever happens


@dataclass(frozen=True)
class Abort:
    code: grpc.StatusCode
    details: str = ""


HANG = object()
Answer = Any  # a response message, Callable[[request], response], Abort or HANG


def response_type(rpc: str) -> Any:
    return getattr(pb, SERVICE.methods_by_name[rpc].output_type.name)


def status(code: int, message: str = "") -> common_pb2.ErrorStatus:
    """An ErrorStatus as the server writes it (code, Kafka's name, message)."""
    return common_pb2.ErrorStatus(
        code=code, error_name=error_for_code(code).error_name, message=message
    )


def not_controller(rpc: str, controller_id: int) -> Any:
    """A standby's answer: NOT_CONTROLLER for the whole request, naming the active one."""
    return response_type(rpc)(
        controller_id=controller_id,
        error=status(NotControllerError.code, "this node is not the active controller"),
    )


class FakeController:
    def __init__(self, node_id: int, port: int = 0, controller_id: int = -1) -> None:
        self.node_id = node_id
        self.controller_id = controller_id  # what unscripted answers name as the controller
        self.requests: list[tuple[str, Any]] = []
        self.cancelled: list[str] = []
        self._scripts: dict[str, list[Answer]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        handlers = {
            rpc: grpc.unary_unary_rpc_method_handler(
                self._handler(rpc),
                request_deserializer=getattr(
                    pb, SERVICE.methods_by_name[rpc].input_type.name
                ).FromString,
                response_serializer=lambda m: m.SerializeToString(),
            )
            for rpc in RPCS
        }
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE.full_name, handlers),)
        )
        self.port = self._server.add_insecure_port(f"127.0.0.1:{port}")
        self._server.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def script(self, rpc: str, *answers: Answer) -> None:
        assert rpc in RPCS, rpc
        with self._lock:
            self._scripts[rpc] = list(answers)

    def reset(self) -> None:
        with self._lock:
            self._scripts.clear()
            self.requests.clear()
            self.cancelled.clear()
            self.controller_id = -1

    def asked(self, rpc: str | None = None) -> list[Any]:
        """The requests received (of one RPC, or every one), in order."""
        with self._lock:
            return [r for name, r in self.requests if rpc is None or name == rpc]

    def stop(self) -> None:
        self._stopping.set()
        self._server.stop(grace=None).wait()

    def _next_answer(self, rpc: str, request: Any) -> Answer:
        with self._lock:
            self.requests.append((rpc, request))
            answers = self._scripts.get(rpc)
            if not answers:
                return response_type(rpc)(controller_id=self.controller_id)
            return answers.pop(0) if len(answers) > 1 else answers[0]

    def _handler(self, rpc: str) -> Callable[[Any, grpc.ServicerContext], Any]:
        def handle(request: Any, context: grpc.ServicerContext) -> Any:
            answer = self._next_answer(rpc, request)
            if answer is HANG:
                waited = 0.0
                while context.is_active() and not self._stopping.is_set() and waited < HANG_LIMIT_S:
                    self._stopping.wait(0.02)
                    waited += 0.02
                if not context.is_active():
                    with self._lock:
                        self.cancelled.append(rpc)
                context.abort(grpc.StatusCode.UNAVAILABLE, "the fake stopped hanging")
            if isinstance(answer, Abort):
                context.abort(answer.code, answer.details)
            if callable(answer):
                return answer(request)
            return answer

        return handle


@contextmanager
def running(*node_ids: int) -> Iterator[list[FakeController]]:
    """Fakes for `node_ids`, stopped at the end."""
    nodes = [FakeController(i) for i in node_ids]
    try:
        yield nodes
    finally:
        for node in nodes:
            node.stop()


@contextmanager
def interrupt_main_when(condition: Callable[[], bool], timeout_s: float = 10.0) -> Iterator[None]:
    """Within the block, Ctrl-C the main thread as soon as `condition()` holds (polled every
    10 ms): a real SIGINT sent to the main thread, which also cuts a `time.sleep` short, as a
    terminal's does (`_thread.interrupt_main` only sets a flag a sleeping thread sees later).

    A condition, not a fixed timer, which could fire while the client is still setting up the
    call; and a test run started in the background inherits SIGINT ignored (a shell's rule for
    background jobs), so Python would never raise KeyboardInterrupt: the block installs
    Python's default SIGINT handler and restores the previous one after.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    main = threading.main_thread().ident or 0

    def watch() -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if condition():
                signal.pthread_kill(main, signal.SIGINT)
                return
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        watcher.join(timeout_s)
        signal.signal(signal.SIGINT, previous)


def serve_until_stdin_closes(port: int) -> None:
    """The script's body (module docstring)."""
    node = FakeController(1, port=port, controller_id=1)
    try:
        print("serving", flush=True)
        sys.stdin.read()
    finally:
        node.stop()


if __name__ == "__main__":
    serve_until_stdin_closes(int(sys.argv[1]))
