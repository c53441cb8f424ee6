"""A replog consumer in a group, as its own process, for the real-node group tests: it polls and
prints one JSON line per assignment change, ``{"assigned": ["t-0", ...], "read": N}``; with
``--stall-after-s`` it stops polling that long after its first assignment for ``--stall-s``
(its heartbeats go on), then polls again. With ``--protocol consumer`` it is a KIP-848 member
(the broker sets its session and heartbeat interval: ``--session-ms`` is unused).

    python tests/cluster/group_member_process.py BOOTSTRAP GROUP TOPIC [--session-ms N]
        [--max-poll-ms N] [--stall-after-s S --stall-s S] [--protocol classic|consumer]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from replog import Consumer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("group")
    parser.add_argument("topic")
    parser.add_argument("--session-ms", type=int, default=2_000)
    parser.add_argument("--max-poll-ms", type=int, default=30_000)
    parser.add_argument("--stall-after-s", type=float, default=None)
    parser.add_argument("--stall-s", type=float, default=0.0)
    parser.add_argument("--protocol", choices=("classic", "consumer"), default="classic")
    args = parser.parse_args()
    timers = (
        {"session_timeout_ms": args.session_ms, "heartbeat_interval_ms": args.session_ms // 10}
        if args.protocol == "classic"
        else {}
    )
    consumer = Consumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        group_protocol=args.protocol,
        auto_offset_reset="earliest",
        max_poll_interval_ms=args.max_poll_ms,
        fetch_max_wait_ms=100,
        **timers,
    )
    consumer.subscribe([args.topic])
    shown: list[str] | None = None
    read = 0
    first_assigned: float | None = None
    stalled = False
    while True:
        for records in consumer.poll(100).values():
            read += len(records)
        assigned = sorted(f"{tp.topic}-{tp.partition}" for tp in consumer.assignment())
        if assigned != shown:
            shown = assigned
            print(json.dumps({"assigned": assigned, "read": read}), flush=True)
        if assigned and first_assigned is None:
            first_assigned = time.monotonic()
        if (
            args.stall_after_s is not None
            and not stalled
            and first_assigned is not None
            and time.monotonic() - first_assigned >= args.stall_after_s
        ):
            stalled = True
            print(json.dumps({"stalling": args.stall_s}), flush=True)
            time.sleep(args.stall_s)


if __name__ == "__main__":
    sys.exit(main())
