"""`host:port` text, Kafka's way: the one place addresses are written and read.

Kafka writes an IPv6 host in brackets wherever a host and a port share a string
(`bootstrap.servers=[::1]:9092`, `listeners=PLAINTEXT://[::1]:9092`,
`controller.quorum.voters=1@[::1]:9093`); a bare `::1:9092` cannot be split back, and gRPC
cannot dial it.

Rules:
- Inside replog a host is kept without brackets (`::1`): sockets and asyncio take it so.
- `format_host_port` brackets a host that contains ':' (`[::1]:9092`, as gRPC targets and
  Kafka's `Utils.formatAddress` want it) and leaves any other host alone (`localhost:9092`).
- `parse_host_port` reads `host:port` or `[host]:port` and returns the host without brackets.
  An unbracketed host with more than one ':' is an error that shows the bracketed spelling;
  so is a missing or non-numeric port (unless the caller gives a default port), an empty host
  (unless the caller allows one: `listeners=PLAINTEXT://:9092` means every interface), and
  anything after the closing bracket but `:port`. The port range is the caller's rule: each
  setting has its own (a listener may ask for port 0, a client address may not).
- Errors are the caller's typed error class (default `ConfigError`) and name the text and
  what it was: `bootstrap.servers entry '::1:9092': an IPv6 host must be written in brackets,
  [::1]:9092`.

Worked example: `parse_host_port("[::1]:9092", "listeners")` is `("::1", 9092)`, and
`format_host_port("::1", 9092)` is `"[::1]:9092"` again.
"""

from __future__ import annotations

import ipaddress

from replog.errors import ConfigError


def format_host_port(host: str, port: int) -> str:
    """`host:port`, with an IPv6 host in brackets (`[::1]:9092`)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_host_port(
    text: str,
    what: str,
    *,
    default_port: int | None = None,
    empty_host: bool = False,
    error: type[Exception] = ConfigError,
) -> tuple[str, int]:
    """`host:port` or `[v6]:port` -> (host without brackets, port); see the module rules.

    The error says `<what> '<text>': <reason>`, so `what` names the text (e.g.
    "bootstrap.servers entry", or "--bootstrap-server:" where a setting's messages have that
    form); `default_port` is the port of a text that gives none; `empty_host` accepts `:port`
    (host "").
    """
    entry = text.strip()

    def bad(reason: str) -> Exception:
        return error(f"{what} {text!r}: {reason}")

    if entry.startswith("["):
        close = entry.find("]")
        if close < 0:
            raise bad("expected [host]:port, no ']' closes the host")
        host, rest = entry[1:close], entry[close + 1 :]
        if not host:
            raise bad("expected [host]:port, the host is empty")
        if not rest and default_port is not None:
            return host, default_port
        if not rest.startswith(":"):
            raise bad(f"expected [host]:port, got {rest!r} after ']'")
        port_text = rest[1:]
    elif entry.count(":") > 1:
        raise bad(f"an IPv6 host must be written in brackets, {_bracketed(entry, default_port)}")
    elif ":" in entry:
        host, _, port_text = entry.partition(":")
    elif default_port is not None and entry:
        return entry, default_port
    else:
        raise bad("expected host:port")
    if not (port_text.isascii() and port_text.isdigit()):
        raise bad(f"expected host:port, the port {port_text!r} is not a number")
    if not host and not empty_host:
        raise bad("expected host:port, the host is empty")
    return host, int(port_text)


def _bracketed(entry: str, default_port: int | None) -> str:
    """How `entry` (an unbracketed IPv6 host, with or without a port) is written correctly."""
    head, _, tail = entry.rpartition(":")
    if tail.isascii() and tail.isdigit() and _is_ipv6(head):
        return format_host_port(head, int(tail))
    if _is_ipv6(entry):
        return f"[{entry}]:{'port' if default_port is None else default_port}"
    return "[host]:port"


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True
