"""Serves one registry over HTTP: `GET /metrics` in the Prometheus text format.

prometheus_client's `start_http_server` runs a small threaded HTTP server on a daemon thread;
the node starts it with its own registry when `metrics.port` is set (not 0) and stops it on
shutdown, so ports are released for a restart. A port in use is an `OSError` naming the address.
The host is bare (`::1`; prometheus_client picks the socket family from it); the URL brackets
an IPv6 host (`http://[::1]:9100/metrics`).
"""

from __future__ import annotations

import logging
import threading
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

from replog.net_address import format_host_port

log = logging.getLogger("replog.server.metrics")


class MetricsEndpoint:
    """`http://host:port/metrics` for `registry` while started."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{format_host_port(self.host, self.port)}/metrics"

    def start(self) -> None:
        try:
            self._server, self._thread = start_http_server(
                self.port, addr=self.host, registry=self.registry
            )
        except OSError as exc:
            raise OSError(
                exc.errno,
                "metrics endpoint cannot listen on "
                f"{format_host_port(self.host, self.port)}: {exc}",
            ) from None
        self.port = self._server.server_port  # the real one when asked for port 0 (tests)
        log.info("metrics on %s", self.url)

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
