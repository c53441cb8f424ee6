"""Why a TLS handshake on an internal listener failed, in the words an operator acts on.

Rules:
- Plaintext bytes (a peer not configured for TLS), an untrusted issuer, an expired
  certificate and a missing client certificate are named as such; any other certificate
  check names OpenSSL's verify message, any other TLS error OpenSSL's reason.
- Only a TLS error is an authentication failure (`is_authentication_failure`), as Kafka counts
  only its SslAuthenticationException: a peer that closes or resets the connection before the
  handshake finished (a port probe, a peer going away) or one that stays silent past asyncio's
  handshake timeout is not; its cause says how the connection ended.
- An alert from the peer says the peer refused the handshake (commonly this node's
  certificate, which its truststore does not trust).
- Pure: it reads the exception only (the listener logs and counts, `link_peer_check`).
"""

from __future__ import annotations

import ssl

# OpenSSL's X509_V_ERR codes for a chain that ends at no trusted certificate.
# OpenSSL's X509_V_ERR codes for a chain that ends at no trusted certificate: issuer unknown,
# self-signed, unverifiable, or signed by another key than the trusted issuer of that name.
_UNTRUSTED_CODES = frozenset({2, 7, 18, 19, 20, 21})
_EXPIRED_CODE = 10  # X509_V_ERR_CERT_HAS_EXPIRED
_NOT_YET_VALID_CODE = 9  # X509_V_ERR_CERT_NOT_YET_VALID
# OpenSSL's reasons when the first bytes are no TLS record: what a plaintext peer sends.
_PLAINTEXT_REASONS = frozenset(
    {
        "WRONG_VERSION_NUMBER",
        "HTTP_REQUEST",
        "HTTPS_PROXY_REQUEST",
        "UNKNOWN_PROTOCOL",
        "PACKET_LENGTH_TOO_LONG",
        "RECORD_LENGTH_MISMATCH",
    }
)
_NO_CERTIFICATE_REASONS = frozenset(
    {"PEER_DID_NOT_RETURN_A_CERTIFICATE", "CERTIFICATE_REQUIRED", "NO_CERTIFICATE_RETURNED"}
)


def handshake_failure_cause(error: BaseException) -> str:
    """The cause of a failed server-side handshake (module rules)."""
    if isinstance(error, ssl.SSLCertVerificationError):
        code = error.verify_code
        if code in _UNTRUSTED_CODES:
            return f"untrusted issuer ({error.verify_message})"
        if code == _EXPIRED_CODE:
            return "expired certificate"
        if code == _NOT_YET_VALID_CODE:
            return "certificate not yet valid"
        return f"certificate refused ({error.verify_message})"
    if isinstance(error, ssl.SSLError):
        reason = error.reason or ""
        if reason in _PLAINTEXT_REASONS:
            return f"plaintext (no TLS record: {reason})"
        if reason in _NO_CERTIFICATE_REASONS:
            return "no client certificate"
        if "_ALERT_" in reason:
            return f"the peer refused the handshake ({reason})"
        return f"TLS error {reason or error}"
    return f"connection ended during the TLS handshake ({type(error).__name__}: {error})"


def is_authentication_failure(error: BaseException) -> bool:
    """Whether a failed handshake is counted and warned of (module rules)."""
    return isinstance(error, ssl.SSLError)
