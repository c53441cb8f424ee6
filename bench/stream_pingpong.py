"""What one follower-fetch exchange costs on a gRPC bidirectional stream (grpc.aio, as the
`ReplicaFetch` stream carries it) against asyncio's own TCP streams (issue #77, the acks=all
latency at half load): a small request answered with a replicated batch's bytes, one exchange
at a time, between two processes on loopback.

Per transport, a server process and a client process; the client writes a `--request-bytes`
request and waits for the `--answer-bytes` answer before the next, `--rounds` times after 10%
unmeasured. Printed per transport: the round trip's median and p99 (client clock), each
process's CPU per exchange (its own clock), and the server's context switches per exchange by
thread (its loop thread, gRPC's poller thread; /proc/<pid>/task/*/status): every switch is a
wake-up that, on a loaded machine, first waits for a core. The gRPC processes run with the
node's polling engine (`GRPC_EXPERIMENTS`, as `replog node` sets it) unless the environment
sets it. The transports alternate within each run, and which goes first alternates too.

    .venv/bin/python bench/stream_pingpong.py [--runs 3] [--rounds 3000] [--answer-bytes 50000]
        [--request-bytes 100] [--port P]

Rules: the server and client are this same file run with `--serve` or `--client`; every
process started is stopped, whatever happens.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

GRPC_ENGINE = "-event_engine_client,-event_engine_listener"  # as `replog node` runs gRPC
_METHOD = "/pingpong.PingPong/Exchange"
_LENGTH = struct.Struct(">i")


async def _serve_grpc(port: int, answer: bytes) -> None:
    import grpc

    async def exchange(requests: object, context: object) -> object:
        async for _ in requests:  # type: ignore[attr-defined]
            yield answer

    handler = grpc.method_handlers_generic_handler(
        "pingpong.PingPong", {"Exchange": grpc.stream_stream_rpc_method_handler(exchange)}
    )
    server = grpc.aio.server(options=[("grpc.max_send_message_length", 1 << 27)])
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


async def _serve_tcp(port: int, answer: bytes, request_bytes: int) -> None:
    framed = _LENGTH.pack(len(answer)) + answer

    class Answering(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            assert isinstance(transport, asyncio.Transport)
            self.transport = transport
            transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.pending = 0

        def data_received(self, data: bytes) -> None:
            self.pending += len(data)
            while self.pending >= request_bytes:
                self.pending -= request_bytes
                self.transport.write(framed)

    server = await asyncio.get_running_loop().create_server(Answering, "127.0.0.1", port)
    await server.serve_forever()


async def _client(kind: str, port: int, rounds: int, request_bytes: int) -> None:
    request = b"r" * request_bytes
    times: list[float] = []
    if kind == "grpc":
        import grpc

        channel = grpc.aio.insecure_channel(
            f"127.0.0.1:{port}", options=[("grpc.max_receive_message_length", 1 << 27)]
        )
        call = channel.stream_stream(_METHOD)()
        warm = rounds // 10
        for i in range(warm + rounds):
            if i == warm:
                cpu = time.process_time()
            started = time.perf_counter()
            await call.write(request)
            await call.read()
            times.append(time.perf_counter() - started)
        cpu = time.process_time() - cpu
        call.cancel()
        await channel.close()
    else:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        warm = rounds // 10
        for i in range(warm + rounds):
            if i == warm:
                cpu = time.process_time()
            started = time.perf_counter()
            writer.write(request)
            (length,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
            await reader.readexactly(length)
            times.append(time.perf_counter() - started)
        cpu = time.process_time() - cpu
        writer.close()
    measured = sorted(times[warm:])
    print(
        f"{measured[len(measured) // 2] * 1e6:.0f} {measured[int(len(measured) * 0.99)] * 1e6:.0f}"
        f" {cpu / rounds * 1e6:.1f}"
    )


def _threads(pid: int) -> dict[int, tuple[str, int, int]]:
    """Each thread of `pid`: (name, context switches, CPU ticks)."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            switches = sum(
                int(line.split()[1])
                for line in (task / "status").read_text().splitlines()
                if "voluntary_ctxt_switches" in line
            )
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            found[int(task.name)] = (name, switches, int(fields[11]) + int(fields[12]))
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


def _one(kind: str, args: argparse.Namespace) -> dict[str, float]:
    env = dict(os.environ)
    env.setdefault("GRPC_EXPERIMENTS", GRPC_ENGINE)
    me = [sys.executable, __file__, "--port", str(args.port)]
    sizes = ["--answer-bytes", str(args.answer_bytes), "--request-bytes", str(args.request_bytes)]
    server = subprocess.Popen([*me, "--serve", kind, *sizes], env=env)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", args.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit(f"stream_pingpong: the {kind} server did not start") from None
                time.sleep(0.1)
        before = _threads(server.pid)
        out = subprocess.run(
            [*me, "--client", kind, "--rounds", str(args.rounds), *sizes],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        after = _threads(server.pid)
    finally:
        server.terminate()
        server.wait()
    exchanges = args.rounds + args.rounds // 10
    ticks = os.sysconf("SC_CLK_TCK")
    loop_switches = poller_switches = server_ticks = 0
    main_tid = server.pid
    for tid, (name, switches, cpu) in after.items():
        was = before.get(tid, (name, 0, 0))
        server_ticks += cpu - was[2]
        if tid == main_tid:
            loop_switches += switches - was[1]
        elif name.startswith("python"):  # gRPC's poller thread keeps the interpreter's name
            poller_switches += switches - was[1]
    return {
        "p50_us": float(out[0]),
        "p99_us": float(out[1]),
        "client_cpu_us": float(out[2]),
        "server_cpu_us": server_ticks / ticks / exchanges * 1e6,
        "loop_switches": loop_switches / exchanges,
        "poller_switches": poller_switches / exchanges,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3000)
    parser.add_argument("--answer-bytes", type=int, default=50_000)
    parser.add_argument("--request-bytes", type=int, default=100)
    parser.add_argument("--port", type=int, default=27590)
    parser.add_argument("--serve", choices=("grpc", "tcp"), help=argparse.SUPPRESS)
    parser.add_argument("--client", choices=("grpc", "tcp"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    answer = b"a" * args.answer_bytes
    if args.serve == "grpc":
        asyncio.run(_serve_grpc(args.port, answer))
    elif args.serve == "tcp":
        asyncio.run(_serve_tcp(args.port, answer, args.request_bytes))
    elif args.client:
        asyncio.run(_client(args.client, args.port, args.rounds, args.request_bytes))
    else:
        print(f"load average before: {os.getloadavg()[0]:.1f}")
        for run in range(args.runs):
            kinds = ("grpc", "tcp") if run % 2 == 0 else ("tcp", "grpc")
            for kind in kinds:
                r = _one(kind, args)
                print(
                    f"run {run + 1} {kind:4s}: round trip p50 {r['p50_us']:.0f} us, p99"
                    f" {r['p99_us']:.0f} us; CPU per exchange client {r['client_cpu_us']:.0f} us,"
                    f" server {r['server_cpu_us']:.0f} us; server context switches per exchange:"
                    f" loop thread {r['loop_switches']:.2f}, poller {r['poller_switches']:.2f}"
                )
        print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
