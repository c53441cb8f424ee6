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
  anything after the closing bracket but `:port`, and a port outside [`min_port`, 65535]
  (checked before `int()`, which refuses a string of thousands of digits with a bare
  ValueError). `min_port` is the caller's rule: a listener may ask for port 0, a client
  address may not.
- `parse_host` reads a host written alone (`metrics.host`): `::1` or `[::1]`, never with a
  port; a ':' outside an IPv6 literal is an error pointing at the port's own setting.
- The wildcard: an empty host (`listeners=PLAINTEXT://:9092`) or an unspecified address
  (`0.0.0.0`, `::`) binds every interface (`is_wildcard`). An empty host is advertised as
  `local_canonical_host_name()`, Java's `InetAddress.getLocalHost().getCanonicalHostName()`
  as Kafka's `ListenerInfo.withWildcardHostnamesResolved` uses it; an unspecified address is
  never advertised (no client can dial it; the caller refuses it).
- Errors are the caller's typed error class (default `ConfigError`) and name the text and
  what it was: `bootstrap.servers entry '::1:9092': an IPv6 host must be written in brackets,
  [::1]:9092`.

Worked example: `parse_host_port("[::1]:9092", "listeners")` is `("::1", 9092)`, and
`format_host_port("::1", 9092)` is `"[::1]:9092"` again.
"""

from __future__ import annotations

import ipaddress
import socket

from replog.errors import ConfigError

MAX_PORT = 65535


def format_host_port(host: str, port: int) -> str:
    """`host:port`, with an IPv6 host in brackets (`[::1]:9092`)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def format_peer(peername: object) -> str:
    """A connected socket's peer (its `peername`: (host, port[, flowinfo, scope id]) for TCP)
    as `host:port`, for logs and errors."""
    if isinstance(peername, tuple):
        return format_host_port(peername[0], peername[1])
    return "unknown peer" if peername is None else str(peername)


def parse_host_port(
    text: str,
    what: str,
    *,
    default_port: int | None = None,
    empty_host: bool = False,
    min_port: int = 0,
    error: type[Exception] = ConfigError,
) -> tuple[str, int]:
    """`host:port` or `[v6]:port` -> (host without brackets, port); see the module rules.

    The error says `<what> '<text>': <reason>`, so `what` names the text (e.g.
    "bootstrap.servers entry", or "--bootstrap-server:" where a setting's messages have that
    form); `default_port` is the port of a text that gives none; `empty_host` accepts `:port`
    (host ""); `min_port` is the lowest port the setting takes.
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
    if len(port_text.lstrip("0")) > 5 or not min_port <= int(port_text) <= MAX_PORT:
        raise bad(f"port must be in [{min_port}, {MAX_PORT}]")
    if not host and not empty_host:
        raise bad("expected host:port, the host is empty")
    return host, int(port_text)


def parse_host(text: str, what: str, *, error: type[Exception] = ConfigError) -> str:
    """A host written alone (`localhost`, `::1` or `[::1]`) -> the host without brackets.

    The error says `<what>='<text>': <reason>` (`what` is the setting's key). The port has a
    setting of its own, so `host:port` is refused here rather than failing at bind time.
    """
    entry = text.strip()

    def bad(reason: str) -> Exception:
        return error(f"{what}={text!r}: {reason}")

    host = entry[1:-1] if entry.startswith("[") and entry.endswith("]") else entry
    if not host:
        raise bad("must not be empty")
    if "[" in host or "]" in host or (":" in host and not _is_ipv6(host)):
        raise bad("expected a host alone (localhost, ::1 or [::1]); the port has its own setting")
    return host


def is_wildcard(host: str) -> bool:
    """Whether binding `host` means every interface: empty, `0.0.0.0`, `::` (any spelling)."""
    host = host.strip()
    if not host:
        return True
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:  # a name, not an address literal
        return False


def local_canonical_host_name() -> str:
    """This machine's name as Java's `InetAddress.getLocalHost().getCanonicalHostName()` gives
    it: the host name's first address (IPv4 first, Java's default order; `localhost` is the
    loopback), then that address's reverse-lookup name if its forward lookup leads back to the
    address (Java's spoofing check), else the address itself, bare.

    `OSError` (`socket.gaierror`) when the host name does not resolve or is no valid name:
    Java's UnknownHostException, which stops a Kafka broker at start-up; the caller names the
    setting. It blocks for as long as the system resolver takes (its timeouts and retries when
    DNS does not answer, as Java's lookup does): a broker calls it once, while its node is
    built, before the node serves anything (an application that builds a node on its own
    event loop waits that long there too).
    """
    name = socket.gethostname()
    if name == "localhost":
        address = "127.0.0.1"
    else:
        addresses = _addresses(name)
        if not addresses:
            raise socket.gaierror(f"{name!r} has no address")
        address = next((a for a in addresses if ":" not in a), addresses[0])
    try:
        canonical = socket.gethostbyaddr(address)[0]
        forward = _addresses(canonical)
    except OSError:  # no reverse name, or it does not resolve: Java answers the address
        return address
    return canonical if address in forward else address


def _addresses(name: str) -> list[str]:
    """`name`'s addresses, in the resolver's order (`socket.gaierror` if it has none)."""
    try:
        infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except UnicodeError as error:  # an empty or over-long label: IDNA refuses it before DNS
        raise socket.gaierror(f"{name!r} is not a valid host name ({error})") from None
    return [str(info[4][0]) for info in infos]


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
