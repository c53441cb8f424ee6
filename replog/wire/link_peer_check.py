"""Who may use a node's internal links: only the cluster's nodes, recognised by their
certificates' principals.

Rules:
- A node is recognised as Kafka recognises its inter-broker principal: the principal of the
  certificate it presents (its subject mapped by `ssl.principal.mapping.rules`) is one of
  `super.users` (`LinkSettings.node_principals`). A certificate the truststore trusts with
  another principal (a client's) is refused, and so is a connection without one.
- A refused gRPC call ends PERMISSION_DENIED naming the principal, its handler never runs; a
  refused framed connection (Raft Fetch, metadata append) is closed before its greeting is
  read. Each refusal is one WARNING naming the peer and the cause
  (`InternalPeerRefusedError`), once per peer address and principal: a refused node retries,
  and its log would drown the rest. The node keeps serving the others.
- A TLS handshake that fails on a framed listener (plaintext bytes, an untrusted issuer, an
  expired certificate, no client certificate: `tls_handshake_failure`) is refused the same
  way, one WARNING per peer host and cause, and every one is counted (`on_failed_handshake`,
  Kafka's failed-authentication-total).
- A gRPC call costs a set probe once its certificate was let in (the nodes' certificates are
  remembered by their bytes); a framed connection is checked when made.
"""

from __future__ import annotations

import inspect
import logging
import ssl
from collections.abc import Callable
from typing import Any

import grpc

from replog.errors import (
    InternalPeerRefusedError,
    InvalidCertificateError,
    NoMatchingPrincipalRuleError,
)
from replog.security.principal_mapping import tls_principal
from replog.wire.link_security import LinkSettings
from replog.wire.tls_handshake_failure import handshake_failure_cause, is_authentication_failure
from replog.wire.wrapping_interceptor import Handler, WrappingInterceptor

log = logging.getLogger("replog.server.tls")

_ADMITTED_KEPT = 64  # node certificates remembered; a cluster has a few nodes


class PeerCheck:
    """The admission decision of one node's internal listeners (module rules)."""

    def __init__(
        self, settings: LinkSettings, on_failed_handshake: Callable[[], None] | None = None
    ) -> None:
        self._settings = settings
        self._logged: set[tuple[str, str]] = set()
        self.on_failed_handshake = on_failed_handshake

    def refusal(self, certificate: bytes | None, peer: str) -> InternalPeerRefusedError | None:
        """None when the peer whose certificate (DER, None: none) is `certificate` is a node;
        else the error, logged once per peer host and cause."""
        cause = self._cause(certificate)
        if cause is None:
            return None
        return self._refused(peer, cause)

    def handshake_failed(self, peer: str, error: BaseException) -> None:
        """A framed connection whose TLS handshake failed with `error`: a TLS error is
        counted and logged once per peer host and cause; a connection the peer ended before
        the handshake is said at DEBUG only (`tls_handshake_failure`)."""
        cause = handshake_failure_cause(error)
        if not is_authentication_failure(error):
            log.debug("internal link from %s: %s", peer, cause)
            return
        if self.on_failed_handshake is not None:
            self.on_failed_handshake()
        self._refused(peer, f"TLS handshake failed: {cause}")

    def _refused(self, peer: str, cause: str) -> InternalPeerRefusedError:
        error = InternalPeerRefusedError(f"internal link from {peer}: {cause}")
        key = (peer.rpartition(":")[0] or peer, cause)
        if key not in self._logged:
            self._logged.add(key)
            log.warning("%s", error)
        return error

    def _cause(self, certificate: bytes | None) -> str | None:
        """Why the peer is refused (None: it is a node)."""
        if certificate is None:
            return "no client certificate; only the cluster's nodes are let in"
        try:
            principal = str(tls_principal(certificate, self._settings.principal_mapper))
        except (NoMatchingPrincipalRuleError, InvalidCertificateError) as exc:
            return f"no principal for its certificate: {exc}"
        if principal not in self._settings.node_principals:
            return f"principal {principal} is not a node of this cluster (super.users)"
        return None

    def framed_refusal(self, transport: Any, peer: str) -> InternalPeerRefusedError | None:
        """`refusal` of a framed connection's peer (its TLS transport's certificate)."""
        ssl_object = transport.get_extra_info("ssl_object")
        certificate = None if ssl_object is None else ssl_object.getpeercert(binary_form=True)
        return self.refusal(certificate, peer)


class PeerCheckInterceptor(WrappingInterceptor):
    """Refuses every call of a peer that is not a node (module rules), before its handler."""

    def __init__(self, check: PeerCheck) -> None:
        super().__init__()
        self._check = check
        self._admitted: set[bytes | None] = set()  # the certificates (PEM) of nodes seen

    async def _admit(self, context: grpc.aio.ServicerContext) -> None:
        pems = (context.auth_context() or {}).get("x509_pem_cert") or ()
        pem = pems[0] if pems else None
        if pem is not None and pem in self._admitted:
            return
        certificate = None if pem is None else ssl.PEM_cert_to_DER_cert(pem.decode("ascii"))
        refused = self._check.refusal(certificate, _peer_address(context.peer()))
        if refused is not None:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, str(refused))
        if len(self._admitted) >= _ADMITTED_KEPT:
            self._admitted.clear()
        self._admitted.add(pem)

    def _wrap_unary(self, full_method: str, handler: Handler) -> Handler:
        behavior = handler.unary_unary

        async def admitted(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await self._admit(context)
            answer = behavior(request, context)
            if inspect.isawaitable(answer):
                answer = await answer
            return answer

        return grpc.unary_unary_rpc_method_handler(
            admitted,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    def _wrap_stream(self, full_method: str, handler: Handler) -> Handler:
        behavior = handler.stream_stream

        async def admitted(requests: Any, context: grpc.aio.ServicerContext) -> Any:
            await self._admit(context)
            async for answer in behavior(requests, context):
                yield answer

        return grpc.stream_stream_rpc_method_handler(
            admitted,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


def _peer_address(peer: str | None) -> str:
    """gRPC's `ipv4:127.0.0.1:5000` (or `ipv6:[::1]:5000`) as host:port."""
    text = peer or "?"
    return text.partition(":")[2] if text.startswith(("ipv4:", "ipv6:")) else text
