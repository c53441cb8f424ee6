"""gRPC core's I/O engine and fork handling for replog's own processes, chosen before gRPC
starts.

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

Fork support off (`GRPC_ENABLE_FORK_SUPPORT=0`). grpcio's fork handlers rebuild gRPC's
threads in a child made by `fork()`, so that the child can go on using gRPC. No replog process
does that: its children are started with `posix_spawn` or fork-then-exec. With the handlers on,
a child forked while gRPC calls are running (a `subprocess.Popen` with `preexec_fn`, such as
pyspark's launch of its JVM gateway) died before its `exec` in 36 of 150 launches (SIGSEGV or
SIGABRT: a rebuilt poller thread finds its epoll descriptor closed), 7 of 150 on the polling
engine; with the handlers off, none of 150 did. This is the "Java gateway process exited
before sending its port number" the Spark tests met at times.

Rules:
- gRPC reads both variables once, when `grpc` is first imported. `choose_grpc_engine` must run
  before that; once grpc is imported it changes nothing and says so (returns False).
- A variable already in the environment, even empty, is the operator's choice and is kept.
- replog's own processes choose: the command-line tool (`replog.cli`'s package import, so also
  every node that `replog cluster start` spawns), bench/produce.py and the test session. The
  client library does not on import: an application that embeds replog owns its process's
  gRPC, and may call `choose_grpc_engine()` first thing or set the variables itself.
- Both engines are complete gRPC implementations; the switch changes threads, not behaviour.
"""

from __future__ import annotations

import os
import sys

GRPC_EXPERIMENTS_VARIABLE = "GRPC_EXPERIMENTS"
# The EventEngine parts that carry calls' bytes: client channels and server listeners.
POLL_ENGINE_EXPERIMENTS = "-event_engine_client,-event_engine_listener"
FORK_SUPPORT_VARIABLE = "GRPC_ENABLE_FORK_SUPPORT"
FORK_SUPPORT_OFF = "0"

CHOICES = {
    GRPC_EXPERIMENTS_VARIABLE: POLL_ENGINE_EXPERIMENTS,
    FORK_SUPPORT_VARIABLE: FORK_SUPPORT_OFF,
}


def choose_grpc_engine() -> bool:
    """The polling engine and no fork handlers, for this process and the processes it starts.

    Returns True if a variable was set here; False if grpc was already imported (too late to
    matter) or the operator had set both.
    """
    if "grpc" in sys.modules:
        return False
    chosen = False
    for variable, value in CHOICES.items():
        if variable not in os.environ:
            os.environ[variable] = value
            chosen = True
    return chosen


def engine_description() -> str:
    """Which engine this process's gRPC runs on, and whether its fork handlers are on, for a
    start-up log line."""
    experiments = os.environ.get(GRPC_EXPERIMENTS_VARIABLE)
    if experiments is None:
        engine = "EventEngine (grpcio's default)"
    elif experiments == POLL_ENGINE_EXPERIMENTS:
        engine = f"polling engine ({GRPC_EXPERIMENTS_VARIABLE}={experiments})"
    else:
        engine = f"{GRPC_EXPERIMENTS_VARIABLE}={experiments!r} (set by the operator)"
    fork = os.environ.get(FORK_SUPPORT_VARIABLE)
    handlers = "grpcio's default" if fork is None else f"{FORK_SUPPORT_VARIABLE}={fork!r}"
    return f"gRPC I/O: {engine}; fork handlers: {handlers}"
