"""The clients of test_cluster_separate_hosts.py, run in the clients' network namespace: they
reach the nodes only through their Kafka listeners, over the namespaces' bridge.

    python separate_hosts_client.py create BOOTSTRAP TOPIC PARTITIONS
    python separate_hosts_client.py produce BOOTSTRAP TOPIC RATE
    python separate_hosts_client.py read BOOTSTRAP TOPIC PARTITIONS
    python separate_hosts_client.py in-sync BOOTSTRAP TOPIC REPLICAS

- create: the topic, with every node a replica of each partition and `min.insync.replicas=2`,
  once a Kafka listener accepts connections, asked again until the cluster takes it (its
  brokers registered and unfenced) or 60 s passed.
- produce: keyed records (value `record-<n>`) with acks=all and idempotence, RATE a second,
  until stdin closes; a line `{"acked": N, "failed": M, "by_partition": {"<partition>": N}}`
  every 0.2 s, then, once every record
  is settled, `{"acked": [[partition, offset, value], ...], "failed": [[value, error], ...]}`.
- read: every committed record of the topic, from each partition's start to its end offset:
  one line `[[partition, offset, value], ...]`.
- in-sync: waits (60 s at most) until every partition of the topic has REPLICAS in-sync
  replicas; prints what it saw last, `{"<partition>": {"leader": id, "isr": [ids]}, ...}`,
  and exits 1 if an ISR is short.

The client is replog's own (Admin, Producer, Consumer), on the nodes' Kafka listeners.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections import Counter

from replog import Admin, Consumer, NewTopic, Producer, TopicPartition

PRODUCER = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    # A leader whose link is cut answers nothing: give up on it quickly and ask the others
    # where its partitions went; a record itself waits for as long as the test may take.
    "request.timeout.ms": 3000,
    "socket.connection.setup.timeout.ms": 3000,
    "metadata.max.age.ms": 1000,
    "delivery.timeout.ms": 120_000,
}


WAIT_S = 60


def create(bootstrap: str, topic: str, partitions: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while not any(_accepts(address) for address in bootstrap.split(",")):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no Kafka listener of {bootstrap} accepts connections")
        time.sleep(0.2)
    admin = Admin({"bootstrap.servers": bootstrap})
    try:
        while True:
            try:
                admin.create_topics(
                    [NewTopic(topic, partitions, 3, configs={"min.insync.replicas": "2"})]
                )
                return
            except Exception as error:  # not every broker is up yet, or no controller leader
                if "already exists" in str(error).lower():  # an earlier try's, answer lost
                    return
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        admin.close()


def _accepts(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return False
    return True


def in_sync(bootstrap: str, topic: str, replicas: int) -> None:
    admin = Admin({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + WAIT_S
    try:
        while True:
            described = admin.describe_topics([topic])[topic]
            seen = {
                str(p.partition): {"leader": p.leader, "isr": sorted(p.isr)}
                for p in described.partitions
            }
            if all(len(partition["isr"]) >= replicas for partition in seen.values()):
                break
            if time.monotonic() > deadline:
                print(json.dumps(seen), flush=True)
                sys.exit(1)
            time.sleep(0.5)
    finally:
        admin.close()
    print(json.dumps(seen), flush=True)


def produce(bootstrap: str, topic: str, rate: float) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER})
    acked: list[tuple[int, int, str]] = []
    failed: list[tuple[str, str]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def until_stdin_closes() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=until_stdin_closes, daemon=True).start()

    def on_ack(value: str, metadata: object) -> None:
        with lock:
            acked.append((metadata.partition, metadata.offset, value))  # type: ignore[attr-defined]

    def on_error(value: str, error: BaseException) -> None:
        with lock:
            failed.append((value, repr(error)))

    sent, started, said = 0, time.monotonic(), 0.0
    while not stop.is_set():
        value = f"record-{sent}"
        future = producer.send(topic, value.encode(), key=f"key-{sent % 50}".encode())
        future.add_callback(lambda metadata, v=value: on_ack(v, metadata))
        future.add_errback(lambda error, v=value: on_error(v, error))
        sent += 1
        now = time.monotonic()
        if now - said >= 0.2:
            with lock:
                by_partition = Counter(partition for partition, _, _ in acked)
                progress = {
                    "acked": len(acked),
                    "failed": len(failed),
                    "by_partition": by_partition,
                }
            print(json.dumps(progress), flush=True)
            said = now
        time.sleep(max(0.0, started + sent / rate - now))
    producer.flush()
    producer.close()
    with lock:
        print(json.dumps({"acked": acked, "failed": failed}), flush=True)


def read(bootstrap: str, topic: str, partitions: int) -> None:
    consumer = Consumer(config={"bootstrap.servers": bootstrap})
    wanted = [TopicPartition(topic, p) for p in range(partitions)]
    try:
        consumer.assign(wanted)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(wanted)
        positions = dict.fromkeys(wanted, 0)
        records: list[tuple[int, int, str]] = []
        deadline = time.monotonic() + 30
        while any(positions[tp] < ends[tp] for tp in wanted) and time.monotonic() < deadline:
            for tp, polled in consumer.poll(timeout_ms=500).items():
                for record in polled:
                    if record.offset < ends[tp]:
                        records.append((tp.partition, record.offset, record.value.decode()))
                    positions[tp] = record.offset + 1
    finally:
        consumer.close()
    print(json.dumps(records), flush=True)


def main() -> None:
    command, bootstrap, topic, number = sys.argv[1:5]
    if command == "create":
        create(bootstrap, topic, int(number))
    elif command == "produce":
        produce(bootstrap, topic, float(number))
    elif command == "in-sync":
        in_sync(bootstrap, topic, int(number))
    else:
        read(bootstrap, topic, int(number))


if __name__ == "__main__":
    main()
