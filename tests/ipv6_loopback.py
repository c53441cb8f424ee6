"""Whether this machine can bind the IPv6 loopback (`::1`), for the tests that need it.

A container or VM without IPv6 cannot run them; that is the machine, not a missing
dependency of replog, so those tests are skipped there with the reason, never failed.
"""

from __future__ import annotations

import socket

import pytest


def has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


needs_ipv6 = pytest.mark.skipif(
    not has_ipv6_loopback(), reason="this machine has no IPv6 loopback (cannot bind ::1)"
)
