"""An in-process fake Kafka listener whose answers each test scripts, for the admin client and
the admin commands.

`FakeKafkaListener()` listens on 127.0.0.1 (a free port) and answers Kafka's protocol from an
event loop in a thread of its own. ApiVersions is answered with every API the generated codecs
know, at their whole version range (`served` narrows one). Per API (named as Kafka names it:
"Metadata", "CreateTopics", ...), a test scripts a list of answers, used in order (the last
one repeats); an unscripted API answers its response's defaults. An answer is a response
message, a callable `request -> response`, `HANG` (no answer until the client gives up) or
`CLOSE` (the connection is closed instead). Every request is recorded with its version.

Imported by module name (`import fake_kafka_listener`): pytest puts this folder on `sys.path`
for the tests in it, and `tests/cli/conftest.py` adds it for the CLI tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from replog.kafka.messages import REQUESTS, RESPONSES
from replog.kafka.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from replog.kafka.protocol.framing import decode_request, encode_response

HANG = object()
CLOSE = object()
API_VERSIONS = 18
_SIZE = struct.Struct(">i")
_NAMES = {cls.NAME.removesuffix("Request"): key for key, cls in REQUESTS.items()}


class FakeKafkaListener:
    def __init__(self) -> None:
        self.requests: list[tuple[str, Any, int]] = []  # (API name, request, version)
        self.served: dict[int, tuple[int, int]] = {
            key: (cls.MIN_VERSION, cls.MAX_VERSION) for key, cls in REQUESTS.items()
        }
        self._scripts: dict[str, list[Any]] = {}
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop
        ).result()
        self.port: int = self._server.sockets[0].getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self._hanging: list[asyncio.Future[None]] = []
        self._writers: list[asyncio.StreamWriter] = []

    def script(self, api: str, *answers: Any) -> None:
        assert api in _NAMES, f"no API named {api!r}"
        with self._lock:
            self._scripts[api] = list(answers)

    def serve_only(self, api: str, low: int, high: int) -> None:
        """Advertise `api` at versions low..high only."""
        self.served[_NAMES[api]] = (low, high)

    def asked(self, api: str) -> list[Any]:
        """The requests of `api` received so far, in order."""
        with self._lock:
            return [request for name, request, _ in self.requests if name == api]

    def versions(self, api: str) -> list[int]:
        with self._lock:
            return [version for name, _, version in self.requests if name == api]

    def stop(self) -> None:
        async def shut() -> None:
            for hanging in self._hanging:
                hanging.cancel()
            self._server.close()
            for writer in self._writers:
                writer.close()
            await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(shut(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def _answer(self, api: str, request: Any) -> Any:
        with self._lock:
            script = self._scripts.get(api)
            if not script:
                return RESPONSES[_NAMES[api]]()
            answer = script.pop(0) if len(script) > 1 else script[0]
        if answer is HANG or answer is CLOSE:
            return answer
        return answer(request) if callable(answer) else answer

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        try:
            while True:
                size = _SIZE.unpack(await reader.readexactly(4))[0]
                header, body = decode_request(await reader.readexactly(size))
                key, version = header.request_api_key, header.request_api_version
                if key == API_VERSIONS:
                    answer: Any = ApiVersionsResponse(
                        api_keys=[
                            ApiVersion(api_key=k, min_version=low, max_version=high)
                            for k, (low, high) in sorted(self.served.items())
                        ]
                    )
                else:
                    api = REQUESTS[key].NAME.removesuffix("Request")
                    with self._lock:
                        self.requests.append((api, body, version))
                    answer = self._answer(api, body)
                if answer is CLOSE:
                    return
                if answer is HANG:
                    hanging = self._loop.create_future()
                    self._hanging.append(hanging)
                    await hanging
                    return
                writer.write(encode_response(key, version, header.correlation_id, answer))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()


@contextmanager
def listening(count: int = 1) -> Iterator[list[FakeKafkaListener]]:
    """`count` fake listeners, stopped on exit."""
    listeners = [FakeKafkaListener() for _ in range(count)]
    try:
        yield listeners
    finally:
        for listener in listeners:
            listener.stop()


@contextmanager
def http2_server() -> Iterator[str]:
    """The address of a server that greets a connection as an HTTP/2 server (a gRPC port) does:
    with an empty SETTINGS frame on stream 0."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()

        def greet() -> None:
            with contextlib.suppress(OSError):
                peer, _ = server.accept()
                with peer:
                    peer.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
                    peer.recv(1024)

        threading.Thread(target=greet, daemon=True).start()
        yield f"127.0.0.1:{server.getsockname()[1]}"
