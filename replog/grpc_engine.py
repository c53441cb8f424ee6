"""gRPC core's I/O engine for replog's own processes, chosen before gRPC starts.

grpcio (1.85) can move a call's bytes two ways. By default its EventEngine reads and writes
the sockets on a pool of its own threads and posts each completion to a completion queue,
which grpc.aio's poller thread drains and hands to the asyncio loop: three threads wake for
every message. With the EventEngine client and listener switched off (gRPC's documented
`GRPC_EXPERIMENTS` variable, `-name` turns one off), the poller thread polls the sockets
itself (epoll) and one hop per message goes away. On this project's 2-core VM that halved the
thread wake-ups per message (about 11 to 5.5 per side on a bidi stream of 256 KiB messages),
cut the CPU per message by 15-25% on both ends, and took about 0.1 core off the three servers
of the replicated produce benchmark at half load (docs/benchmarks.md): on two cores, CPU per
message is what sets the latency tail.

Rules:
- gRPC reads the variable once, when `grpc` is first imported. `select_poll_engine` must run
  before that; once grpc is imported it changes nothing and says so (returns False).
- A `GRPC_EXPERIMENTS` already in the environment, even empty, is the operator's choice and is
  kept.
- replog's own processes select it: the command-line tool (`replog.cli`'s package import, so
  also every node that `replog cluster start` spawns), the benchmarks and the test session. The
  client library does not on import: an application that embeds replog owns its process's
  gRPC, and may call `select_poll_engine()` first thing or set the variable itself.
- Both engines are complete gRPC implementations; the switch changes threads, not behaviour.
"""

from __future__ import annotations

import os
import sys

GRPC_EXPERIMENTS_VARIABLE = "GRPC_EXPERIMENTS"
# The EventEngine parts that carry calls' bytes: client channels and server listeners.
POLL_ENGINE_EXPERIMENTS = "-event_engine_client,-event_engine_listener"


def select_poll_engine() -> bool:
    """Switch gRPC to its polling engine for this process (and the processes it starts).

    Returns True if the variable was set here; False if the operator had set it or grpc was
    already imported (too late to matter).
    """
    if GRPC_EXPERIMENTS_VARIABLE in os.environ or "grpc" in sys.modules:
        return False
    os.environ[GRPC_EXPERIMENTS_VARIABLE] = POLL_ENGINE_EXPERIMENTS
    return True


def engine_description() -> str:
    """Which engine this process's gRPC runs on, for a start-up log line."""
    experiments = os.environ.get(GRPC_EXPERIMENTS_VARIABLE)
    if experiments is None:
        return "gRPC I/O: EventEngine (grpcio's default)"
    if experiments == POLL_ENGINE_EXPERIMENTS:
        return f"gRPC I/O: polling engine ({GRPC_EXPERIMENTS_VARIABLE}={experiments})"
    return f"gRPC I/O: {GRPC_EXPERIMENTS_VARIABLE}={experiments!r} (set by the operator)"
