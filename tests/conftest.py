"""The test session runs gRPC on the engine replog's own processes use (replog/grpc_engine.py).

gRPC reads its engine switch when grpc is first imported, which for this process is while
pytest collects the first test module; this conftest is loaded before any of them.
"""

from __future__ import annotations

from replog.grpc_engine import select_poll_engine

select_poll_engine()
