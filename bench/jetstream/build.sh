#!/usr/bin/env bash
# Build `replog bench`'s NATS JetStream pieces from the Go module proxy, outside the checkout:
# the driver (jsbench, this directory's module: github.com/nats-io/nats.go) and the server
# (github.com/nats-io/nats-server/v2, pinned below), into $JETSTREAM_BIN (default
# ~/.cache/replog-bench/jetstream). Idempotent: a binary already built for these versions is
# kept. Needs Go 1.24+. CI never runs it: the harness's tests run replog only.
#
# Usage: bash bench/jetstream/build.sh        (prints the directory holding both binaries)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NATS_SERVER_VERSION="${NATS_SERVER_VERSION:-v2.15.2}"
BIN="${JETSTREAM_BIN:-$HOME/.cache/replog-bench/jetstream}"
mkdir -p "$BIN"

if ! command -v go >/dev/null 2>&1; then
  echo "build.sh: go not found (Go 1.24+ is needed to build the JetStream driver)" >&2
  exit 1
fi

# The driver is rebuilt when its source is newer than the binary.
if [ ! -x "$BIN/jsbench" ] || [ "$HERE/main.go" -nt "$BIN/jsbench" ] || [ "$HERE/go.sum" -nt "$BIN/jsbench" ]; then
  (cd "$HERE" && go build -trimpath -o "$BIN/jsbench" .) >&2
fi

if [ ! -x "$BIN/nats-server" ] || [ "$(cat "$BIN/nats-server.version" 2>/dev/null)" != "$NATS_SERVER_VERSION" ]; then
  GOBIN="$BIN" go install -trimpath "github.com/nats-io/nats-server/v2@$NATS_SERVER_VERSION" >&2
  echo "$NATS_SERVER_VERSION" > "$BIN/nats-server.version"
fi
echo "$BIN"
