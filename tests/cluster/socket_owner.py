"""Which process opened a loopback TCP connection, asked of the kernel (Linux /proc).

A proxy that accepted a connection knows only its peer's address, and every node connects
from 127.0.0.1. The kernel knows more: /proc/net/tcp lists each socket with its local and remote
address and its inode, and /proc/<pid>/fd links every open socket of a process to
`socket:[inode]`. The connecting socket is the one whose local address is the peer's and
whose remote address is the proxy's; its owner is the process holding that inode.

Why the kernel and not a packet filter on per-node addresses (an nftables recipe): gRPC offers no
way to bind a channel's outgoing socket to a source address, so the nodes' connections cannot be
told apart by address, and nftables would also need root.
"""

from __future__ import annotations

import ipaddress
import os
import sys
from collections.abc import Mapping

TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")


def connecting_inode(peer: tuple[str, int], accepting: tuple[str, int]) -> int | None:
    """The inode of the socket that connected from `peer` to `accepting` (host, port): the
    whole address pair, since one local port may serve connections to other addresses, and a
    closed connection's TIME_WAIT row (inode 0) may still name the same pair."""
    wanted = (_address(*peer), _address(*accepting))
    for table in TCP_TABLES:
        try:
            with open(table, encoding="ascii") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            # sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
            fields = row.split()
            inode = int(fields[9])
            if inode and (_parse(fields[1]), _parse(fields[2])) == wanted:
                return inode
    return None


def _address(host: str, port: int) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    """An address as /proc/net/tcp6 shows IPv4 (mapped), so that both tables compare alike."""
    ip = ipaddress.ip_address(host.strip("[]"))
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip, port


def _parse(text: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    """`0100007F:1F90` (IPv4) or 32 hex digits (IPv6), each 32-bit word printed as a number
    in host byte order, then the port in hex."""
    hex_address, hex_port = text.split(":")
    raw = bytes.fromhex(hex_address)
    words = (raw[i : i + 4] for i in range(0, len(raw), 4))
    packed = b"".join(w[::-1] if sys.byteorder == "little" else w for w in words)
    ip = ipaddress.ip_address(packed)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip, int(hex_port, 16)


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
