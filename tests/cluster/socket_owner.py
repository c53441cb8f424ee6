"""Which process opened a loopback TCP connection, asked of the kernel (Linux).

A proxy that accepted a connection knows only its peer's address, and every node connects
from 127.0.0.1. The kernel knows more: its socket diagnostics (netlink, or /proc/net/tcp) give
the inode of the socket with a given local and remote address, and /proc/<pid>/fd links every
open socket of a process to
`socket:[inode]`. The connecting socket is the one whose local address is the peer's and
whose remote address is the proxy's; its owner is the process holding that inode.

Why the kernel and not a packet filter on per-node addresses (an nftables recipe): gRPC offers no
way to bind a channel's outgoing socket to a source address, so the nodes' connections cannot be
told apart by address, and nftables would also need root.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
import sys
from collections.abc import Mapping

TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")


def connecting_inode(peer: tuple[str, int], accepting: tuple[str, int]) -> int | None:
    """The inode of the socket that connected from `peer` to `accepting` (host, port).

    Asked of the kernel's socket diagnostics (netlink `SOCK_DIAG_BY_FAMILY`, what `ss` uses)
    for exactly that address pair: tens of microseconds. A proxy asks this for every connection
    it accepts, and reading /proc/net/tcp takes the kernel 10-25 ms on a busy machine (it walks
    the whole connection table): proxies that fell that far behind timed their nodes' connects
    out. The tables are the fallback where netlink is refused."""
    try:
        for family, local, remote in _diag_forms(peer, accepting):
            inode = _diag_inode(family, local, peer[1], remote, accepting[1])
            if inode:
                return inode
        return None
    except OSError:
        return _table_inode(peer, accepting)


NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 1
_NO_COOKIE = 0xFFFFFFFF
_NLMSG_HEADER = struct.Struct("=IHHII")  # length, type, flags, sequence, port id
_DIAG_REQUEST = struct.Struct("=BBBBI")  # family, protocol, extensions, pad, states
_DIAG_MESSAGE_INODE_AT = _NLMSG_HEADER.size + 4 + 48 + 16  # after the state, sockid, 4 counters


def _diag_forms(
    peer: tuple[str, int], accepting: tuple[str, int]
) -> list[tuple[int, bytes, bytes]]:
    """(family, local address, remote address) as 16-byte fields, for each socket family the
    connecting socket may be: IPv4, and IPv6 with IPv4-mapped addresses (a dual-stack socket,
    as gRPC opens); IPv6 only for IPv6 addresses."""
    local, remote = _ip(peer[0]), _ip(accepting[0])
    if isinstance(local, ipaddress.IPv4Address) and isinstance(remote, ipaddress.IPv4Address):
        return [
            (socket.AF_INET, local.packed + bytes(12), remote.packed + bytes(12)),
            (socket.AF_INET6, _mapped(local), _mapped(remote)),
        ]
    return [(socket.AF_INET6, _mapped(local), _mapped(remote))]


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    ip = ipaddress.ip_address(host.strip("[]"))
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _mapped(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bytes:
    return b"\0" * 10 + b"\xff\xff" + ip.packed if ip.version == 4 else ip.packed


def _diag_inode(family: int, local: bytes, lport: int, remote: bytes, rport: int) -> int | None:
    """The inode of the TCP socket with exactly this address pair, or None."""
    sockid = struct.pack("!HH", lport, rport) + local + remote
    sockid += struct.pack("=III", 0, _NO_COOKIE, _NO_COOKIE)  # any interface, no cookie
    request = _DIAG_REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + sockid
    header = _NLMSG_HEADER.pack(
        _NLMSG_HEADER.size + len(request), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0
    )
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as netlink:
        netlink.send(header + request)
        answer = netlink.recv(8192)
    if _NLMSG_HEADER.unpack_from(answer)[1] != SOCK_DIAG_BY_FAMILY:
        return None  # an error message: no such socket
    (inode,) = struct.unpack_from("=I", answer, _DIAG_MESSAGE_INODE_AT)
    return int(inode) or None


def _table_inode(peer: tuple[str, int], accepting: tuple[str, int]) -> int | None:
    """`connecting_inode` from /proc/net/tcp and tcp6, matched on their own hex text. A closed
    connection's TIME_WAIT row (inode 0) may still name the same pair."""
    for table, local, remote in zip(
        TCP_TABLES, _hex_forms(*peer), _hex_forms(*accepting), strict=True
    ):
        if local is None or remote is None:
            continue
        try:
            with open(table, encoding="ascii") as f:
                text = f.read()
        except OSError:
            continue
        at = text.find(f" {local} {remote} ")
        while at >= 0:
            # sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
            line_end = text.find("\n", at)
            inode = int(text[at : None if line_end < 0 else line_end].split()[8])
            if inode:
                return inode
            at = text.find(f" {local} {remote} ", at + 1)
    return None


def _hex_forms(host: str, port: int) -> tuple[str | None, str | None]:
    """An address as /proc/net/tcp and /proc/net/tcp6 print it (each 32-bit word of the address
    as a number in host byte order, in hex, then the port): IPv4 appears in both, in tcp6 as
    an IPv4-mapped address; IPv6 only in tcp6."""
    ip = _ip(host)

    def text(packed: bytes) -> str:
        words = (packed[i : i + 4] for i in range(0, len(packed), 4))
        ordered = b"".join(w[::-1] if sys.byteorder == "little" else w for w in words)
        return f"{ordered.hex().upper()}:{port:04X}"

    return (text(ip.packed) if ip.version == 4 else None), text(_mapped(ip))


def owner(inode: int, pids: Mapping[int, int]) -> int | None:
    """The key in `pids` (name -> process id) of the process holding socket `inode`."""
    target = f"socket:[{inode}]"
    for name, pid in pids.items():
        directory = f"/proc/{pid}/fd"
        try:
            descriptors = os.listdir(directory)
        except OSError:  # the process is gone
            continue
        for descriptor in descriptors:
            try:
                if os.readlink(f"{directory}/{descriptor}") == target:
                    return name
            except OSError:  # closed meanwhile
                continue
    return None
