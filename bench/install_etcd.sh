#!/usr/bin/env bash
# Install etcd (server + etcdctl) from Debian for bench/raft_commit.py. Idempotent: does
# nothing when both binaries are already on PATH.
set -euo pipefail

if command -v etcd >/dev/null 2>&1 && command -v etcdctl >/dev/null 2>&1; then
  echo "etcd already installed: $(etcd --version 2>/dev/null | head -1)"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

# The package lists may be missing or stale; refresh them only when apt does not know the package.
if ! apt-cache show etcd-server >/dev/null 2>&1; then
  $SUDO apt-get update
fi
$SUDO apt-get install -y --no-install-recommends etcd-server etcd-client

# Debian's package may enable a system etcd service listening on 2379/2380; the benchmark
# starts its own members on other ports, so leave any service alone but say what we installed.
echo "installed: $(etcd --version | head -1)"
