"""Hosts of their own on one machine, for tests of nodes on separate hosts: each host a Linux
network namespace with one address, its link a veth pair to a bridge (the switch) in a namespace
of its own; made with iproute2's `ip`, which needs root (CI runs as root).

Rules:
- Every name is this run's own (`replog-<pid>-<random>-<label>`): parallel runs never meet, and
  the interfaces live inside the namespaces, so their short names (`br0`, `eth0`, `port-<label>`)
  cannot clash either. Nothing is added to the machine's own namespace: its routes and
  interfaces stay as they were, and the hosts reach nothing but each other.
- `bridged_hosts` deletes every namespace it made on the way out, failure or not (the switch
  last); deleting a namespace deletes its end of each veth pair, and with it the other end.
  Processes started in a host must be stopped first: a namespace lives on, nameless, while a
  process runs in it.
- `cut` takes a host's switch port down (the cable pulled at the switch: the host's interface
  loses its carrier, its address and routes stay); `restore` brings it back.
- Without root or without `ip`, `bridged_hosts` fails the test with the reason: such a test
  must run in CI, not be skipped there.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import pytest

IP_TIMEOUT_S = 10


def ip(*args: str) -> str:
    """Run `ip ARGS`; its stdout. A failure raises with its stderr."""
    done = subprocess.run(
        ["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


@dataclass
class BridgedHosts:
    """Hosts by label, each a namespace with one address on a shared bridge."""

    prefix: str
    addresses: dict[str, str] = field(default_factory=dict)  # label -> its address

    @property
    def switch(self) -> str:
        return f"{self.prefix}-switch"

    def namespace(self, label: str) -> str:
        return f"{self.prefix}-{label}"

    def run_in(self, label: str, argv: Sequence[str]) -> list[str]:
        """`argv` as run in host `label` (`ip netns exec` execs it: the pid is the command's)."""
        return ["ip", "netns", "exec", self.namespace(label), *argv]

    def cut(self, label: str) -> None:
        ip("-n", self.switch, "link", "set", f"port-{label}", "down")

    def restore(self, label: str) -> None:
        ip("-n", self.switch, "link", "set", f"port-{label}", "up")

    def sockets(self, label: str, *options: str) -> str:
        """`ss -n OPTIONS` inside host `label`."""
        done = subprocess.run(
            self.run_in(label, ["ss", "-n", *options]),
            capture_output=True,
            text=True,
            timeout=IP_TIMEOUT_S,
            check=True,
        )
        return done.stdout


def _require_tools() -> None:
    missing = [tool for tool in ("ip", "ss") if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"{' and '.join(missing)} not found: this test needs iproute2 (root, Linux)")
    if os.geteuid() != 0:
        pytest.fail("this test makes network namespaces with `ip netns`: it must run as root")


@contextlib.contextmanager
def bridged_hosts(addresses: Mapping[str, str], prefix_length: int = 24) -> Iterator[BridgedHosts]:
    """A namespace per label in `addresses` (label -> IPv4 address), its `eth0` holding that
    address and wired to one bridge, loopback up as on any host; all deleted on the way out."""
    _require_tools()
    hosts = BridgedHosts(f"replog-{os.getpid()}-{secrets.token_hex(3)}")
    made: list[str] = []
    try:
        ip("netns", "add", hosts.switch)
        made.append(hosts.switch)
        ip("-n", hosts.switch, "link", "add", "br0", "type", "bridge")
        ip("-n", hosts.switch, "link", "set", "br0", "up")
        for label, address in addresses.items():
            namespace = hosts.namespace(label)
            ip("netns", "add", namespace)
            made.append(namespace)
            port = f"port-{label}"
            ip("-n", hosts.switch, "link", "add", port, "type", "veth", "peer", "name", "eth0",
               "netns", namespace)  # fmt: skip
            ip("-n", hosts.switch, "link", "set", port, "master", "br0", "up")
            ip("-n", namespace, "addr", "add", f"{address}/{prefix_length}", "dev", "eth0")
            ip("-n", namespace, "link", "set", "eth0", "up")
            ip("-n", namespace, "link", "set", "lo", "up")
            hosts.addresses[label] = address
        yield hosts
    finally:
        errors = []
        for namespace in [*made[1:], *made[:1]]:  # the switch last
            try:
                ip("netns", "del", namespace)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                errors.append(str(exc))
        if errors and sys.exc_info()[1] is None:  # else the test's own failure says more
            raise RuntimeError("; ".join(errors))
