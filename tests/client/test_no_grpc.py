"""The client library talks only Kafka's protocol: importing it, the Admin included, loads no
grpc (gRPC is the cluster's internal transport; docs/architecture.md). Checked in a fresh
interpreter, since this test session has grpc loaded already."""

from __future__ import annotations

import subprocess
import sys

CLIENT_MODULES = ["replog", "replog.aio", "replog.client.admin", "replog.client.consumer"]


def test_importing_the_client_library_loads_no_grpc() -> None:
    code = (
        "import importlib, sys\n"
        f"for name in {CLIENT_MODULES!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m == 'grpc' or m.startswith('grpc.')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout
