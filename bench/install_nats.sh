#!/usr/bin/env bash
# Install what bench/produce.py needs to run its NATS JetStream baseline: the NATS server from
# Debian (`nats-server`, 2.9.10 on bookworm) and the nats-py client for the benchmark's Python.
# Idempotent: does nothing for a part that is already there.
#
# Usage: bash bench/install_nats.sh [PYTHON]    (default PYTHON: the repo's .venv/bin/python,
#        else python3)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
PYTHON="${1:-}"
if [ -z "$PYTHON" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi
# The client version the figures in docs/benchmarks.md were measured with.
NATS_PY_SPEC="nats-py==2.16.0"

if command -v nats-server >/dev/null 2>&1; then
  echo "nats-server already installed: $(nats-server --version)"
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  # The package lists may be missing or stale; refresh them only when apt does not know it.
  if ! apt-cache show nats-server >/dev/null 2>&1; then
    $SUDO apt-get update
  fi
  $SUDO apt-get install -y --no-install-recommends nats-server
  # Debian's package ships no enabled service; the benchmark starts its own servers on its own
  # ports, so nothing else is configured here.
  echo "installed: $(nats-server --version)"
fi

if "$PYTHON" -c 'import nats' >/dev/null 2>&1; then
  echo "nats-py already installed for $PYTHON: $("$PYTHON" -c 'import nats.aio.client as c; print(c.__version__)')"
else
  "$PYTHON" -m pip install --quiet "$NATS_PY_SPEC"
  echo "installed for $PYTHON: $NATS_PY_SPEC"
fi
