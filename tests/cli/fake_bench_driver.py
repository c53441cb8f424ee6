"""A stand-in driver program for `replog bench`'s driver-process protocol
(replog/cli/bench/processes.py), for tests: no cluster, a directory stands for one.

The task's `servers` names a directory: a producer "sends" its records by adding their count
to `<servers>/<topic>.count` (every record acknowledged 1 ms after its send), and a consumer
has "received" every record counted for the topics it is assigned. An admin "sends" 20
CreateTopics requests. A task whose driver is
"broken" writes to stderr and exits 1 before "ready"."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from array import array


def counted(servers: str, topics: set[str]) -> int:
    total = 0
    for topic in topics:
        try:
            with open(os.path.join(servers, f"{topic}.count"), encoding="ascii") as f:
                total += sum(int(line) for line in f if line.strip())
        except FileNotFoundError:
            pass
    return total


def main() -> int:
    task = json.loads(sys.stdin.readline())
    if task["driver"] == "broken":
        print("fake driver: cannot reach the cluster", file=sys.stderr)
        return 1
    print("ready", flush=True)
    start_ns = int(sys.stdin.readline().split()[1])
    sent_s = (time.time_ns() - start_ns) / 1e9
    if task["role"] == "admin":  # 20 CreateTopics requests, answered at once
        records = 20
        result = {"records": records, "requests": records, "last_receive_ns": 0}
    elif task["role"] == "produce":
        records = task["records"] or int(task["rate"] * task["run_s"])
        with open(os.path.join(task["servers"], f"{task['topic']}.count"), "a") as f:
            f.write(f"{records}\n")
        result = {"records": records, "requests": max(1, records // 10), "last_receive_ns": 0}
    else:
        stop = threading.Event()
        threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
        topics = {topic for topic, _ in task["assigned"]}
        while not stop.wait(0.05):
            print(f"n {counted(task['servers'], topics)}", flush=True)
        records = counted(task["servers"], topics)
        result = {"records": records, "requests": 0, "last_receive_ns": time.time_ns()}
    pairs = array("d", [sent_s, 1.0] * records)
    with open(task["samples_path"], "wb") as f:
        f.write(pairs.tobytes())
    result.update(errors=0, first_error="", cpu_s=0.0)
    print("result " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
