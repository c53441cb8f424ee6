"""A stand-in driver program for `replog bench`'s driver-process protocol
(replog/cli/bench/processes.py), for tests: no cluster, a directory stands for one.

The task's `servers` names a directory: a producer "sends" its records by adding their count
to `<servers>/<topic>.count` (every record acknowledged 1 ms after its send), and a consumer
has "received" every record counted for the topics it is assigned. An admin "sends" 20
CreateTopics requests. A task whose driver is
"broken" writes to stderr and exits 1 before "ready".

As `jsbench` (bench/jetstream/main.go), the JetStream system's one-shot roles keep the streams
in `<servers>/streams`, one name a line: "create" adds the task's streams, "delete" removes
them and every stream "<topic>-p<N>" of the task's topics; a "jetstream" admin's requests add
their topics' streams ("<prefix>-<n>-p<k>")."""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from array import array
from typing import Any


def counted(servers: str, topics: set[str]) -> int:
    total = 0
    for topic in topics:
        try:
            with open(os.path.join(servers, f"{topic}.count"), encoding="ascii") as f:
                total += sum(int(line) for line in f if line.strip())
        except FileNotFoundError:
            pass
    return total


def streams(servers: str) -> list[str]:
    try:
        with open(os.path.join(servers, "streams"), encoding="ascii") as f:
            return f.read().split()
    except FileNotFoundError:
        return []


def keep_streams(servers: str, names: list[str], mode: str = "w") -> None:
    """Write the streams there are (mode "a": add these, in one write: admins run together)."""
    with open(os.path.join(servers, "streams"), mode, encoding="ascii") as f:
        f.write("".join(f"{name}\n" for name in names))


def one_shot(task: dict[str, Any]) -> int:
    servers, named = task["servers"], task["streams"]
    if task["role"] == "create":
        keep_streams(servers, named, "a")
    elif task["role"] == "delete":
        topics = set(task.get("topics") or [])
        keep_streams(
            servers,
            [
                name
                for name in streams(servers)
                if name not in named and re.sub(r"-p[0-9]+$", "", name) not in topics
            ],
        )
    print("result " + json.dumps({"leader": "n1"}), flush=True)
    return 0


def main() -> int:
    task = json.loads(sys.stdin.readline())
    if task.get("driver") == "broken":
        print("fake driver: cannot reach the cluster", file=sys.stderr)
        return 1
    if task["role"] in ("create", "delete", "leader"):
        return one_shot(task)
    print("ready", flush=True)
    start_ns = int(sys.stdin.readline().split()[1])
    sent_s = (time.time_ns() - start_ns) / 1e9
    if task["role"] == "admin":  # 20 CreateTopics requests, answered at once
        records = 20
        result = {"records": records, "requests": records, "last_receive_ns": 0}
        if task["driver"] == "jetstream":
            topics = records * task["topics_per_request"]
            keep_streams(
                task["servers"],
                [
                    f"{task['prefix']}-{n}-p{k}"
                    for n in range(topics)
                    for k in range(task["partitions"])
                ],
                "a",
            )
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
