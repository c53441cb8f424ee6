"""The test session runs gRPC as replog's own processes do (replog/wire/grpc_engine.py): on its
polling engine, without fork handlers (with them, pyspark's launch of its JVM gateway, a fork
then exec while gRPC calls run, at times killed the child before its exec).

gRPC reads both switches when grpc is first imported, which for this process is while pytest
collects the first test module; this conftest is loaded before any of them.
"""

from __future__ import annotations

from replog.wire.grpc_engine import choose_grpc_engine

choose_grpc_engine()
