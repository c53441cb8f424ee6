"""`replog transactions` against a real node (`replog node`, one broker) and confluent-kafka's
transactional producer:

- `list` and `describe` show a transaction Ongoing (its partition listed) and, once committed,
  CompleteCommit; `--state` filters the listing;
- a producer left open (init, begin, produce, never commit, a 15-minute transaction timeout) is
  seen by `describe-producers` with its start offset; `find-hanging` does not report it (its
  coordinator holds the partition and will write the marker: Kafka's rule), `abort
  --start-offset` closes it and a read_committed consumer then reads past it;
- a transaction no coordinator knows (a transactional batch of a producer id no
  InitProducerId gave) is found by `find-hanging` and closed by `abort` with the producer id,
  epoch and coordinator epoch it shows;
- the tables carry Kafka's columns;
- bad input: an unknown transactional id or state name, no open transaction at the offset, an
  unknown topic or partition, a missing scope for `find-hanging`, missing or clashing `abort`
  flags, each exit code 1 with the error naming it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import confluent_kafka as confluent
import pytest

from replog.cli.main import main
from replog.record import build_batch
from tests.confluent_producer import confluent_producer
from tests.eventually import wait_until
from tests.kafka.kafka_node import RunningNode, running_node
from tests.kafka.test_kafka_listener_node import create_topic, wait_serving
from tests.kafka.test_read_committed_node import TOPIC as RAW_TOPIC
from tests.kafka.test_read_committed_node import produce, txn

ORPHAN = 7001  # a producer id no coordinator handed out


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningNode]:
    properties = ["transaction.state.log.num.partitions=3"]
    root = tmp_path_factory.mktemp("txn-cli")
    with running_node(root, "txn-cli-test", properties) as running:
        create_topic(running, "orders", 1)
        create_topic(running, "open", 1)
        create_topic(running, RAW_TOPIC, 1)
        wait_serving(running)
        yield running


def replog(
    node: RunningNode, capsys: pytest.CaptureFixture[str], *words: str
) -> tuple[int, Any, str]:
    """Exit code, stdout as JSON (None if empty) and stderr of `replog transactions ...`."""
    code = main(
        ["transactions", *words, "--json", "--bootstrap-server", node.kafka_address,
         "--timeout", "20"]
    )  # fmt: skip
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else None, err


@contextmanager
def open_transaction(
    node: RunningNode, transactional_id: str, topic: str, value: bytes
) -> Iterator[Any]:
    """A confluent-kafka transactional producer (a 15-minute transaction timeout) with a
    transaction open on `topic`-0 holding `value`; destroyed on leaving, its transaction left as
    it is (tests/confluent_producer.py)."""
    with confluent_producer(
        {
            "bootstrap.servers": node.kafka_address,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 900_000,
        }
    ) as made:
        made.init_transactions(60)
        made.begin_transaction()
        made.produce(topic, value=value, partition=0)
        assert made.flush(30) == 0
        yield made


def test_list_and_describe_show_a_transaction_ongoing_then_complete_commit(
    node: RunningNode, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_transaction(node, "orders-tx", "orders", b"paid") as orders:
        code, (described,), _ = replog(node, capsys, "describe", "--transactional-id", "orders-tx")
        assert code == 0
        assert described["TransactionalId"] == "orders-tx"
        assert described["TransactionState"] == "Ongoing"
        assert described["TopicPartitions"] == "orders-0"
        assert described["TransactionTimeoutMs"] == "900000"
        assert int(described["TransactionDurationMs"]) >= 0
        code, listed, _ = replog(node, capsys, "list", "--state", "Ongoing")
        assert code == 0
        assert [(t["TransactionalId"], t["TransactionState"]) for t in listed] == [
            ("orders-tx", "Ongoing")
        ]
        assert listed[0]["ProducerId"] == described["ProducerId"]

        orders.commit_transaction(30)

    def state() -> tuple[str, str]:
        _, (found,), _ = replog(node, capsys, "describe", "--transactional-id", "orders-tx")
        return found["TransactionState"], found["TopicPartitions"]

    # Complete: the marker is written and the transaction holds no partition any more.
    wait_until(lambda: state() == ("CompleteCommit", ""), "the commit completed")
    _, listed, _ = replog(node, capsys, "list")
    assert ("orders-tx", "CompleteCommit") in [
        (t["TransactionalId"], t["TransactionState"]) for t in listed
    ]
    assert replog(node, capsys, "list", "--state", "Ongoing")[1] == []


def committed_values(
    node: RunningNode, topic: str, expected: int, within_s: float = 20
) -> list[bytes]:
    """What a read_committed consumer reads of `topic`-0 from its start within `within_s`."""
    consumer = confluent.Consumer(
        {
            "bootstrap.servers": node.kafka_address,
            "group.id": f"reader-{topic}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    values: list[bytes] = []
    try:
        consumer.assign([confluent.TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline and len(values) < expected:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                value = message.value()
                assert value is not None
                values.append(value)
    finally:
        consumer.close()
    return values


def test_an_open_producer_is_described_and_aborted_at_its_start_offset(
    node: RunningNode, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_transaction(node, "left-open", "open", b"never-committed"):
        pass  # the transaction outlives its producer
    with confluent_producer({"bootstrap.servers": node.kafka_address}) as plain:
        plain.produce("open", value=b"after", partition=0)
        assert plain.flush(30) == 0
    # The LSO stays at the open transaction.
    assert committed_values(node, "open", 1, within_s=3) == []

    code, producers, _ = replog(
        node, capsys, "describe-producers", "--topic", "open", "--partition", "0"
    )
    assert code == 0
    (open_one,) = [p for p in producers if p["CurrentTransactionStartOffset"] != "None"]
    assert open_one["CurrentTransactionStartOffset"] == "0"
    time.sleep(0.01)
    # Its coordinator holds open-0 and will write its marker: not hanging, as Kafka decides.
    code, found, _ = replog(
        node, capsys, "find-hanging", "--topic", "open", "--max-transaction-timeout", "0"
    )
    assert (code, found) == (0, [])

    code, aborted, err = replog(
        node, capsys, "abort", "--topic", "open", "--partition", "0", "--start-offset", "0"
    )
    assert code == 0, err
    assert aborted["producerId"] == int(open_one["ProducerId"])
    assert committed_values(node, "open", 1) == [b"after"]
    _, producers, _ = replog(
        node, capsys, "describe-producers", "--topic", "open", "--partition", "0"
    )
    assert all(p["CurrentTransactionStartOffset"] == "None" for p in producers)


def test_a_transaction_no_coordinator_knows_is_found_hanging_and_aborted(
    node: RunningNode, capsys: pytest.CaptureFixture[str]
) -> None:
    produce(node, txn(ORPHAN, "orphaned"))
    produce(node, build_batch([(int(time.time() * 1000), b"k", b"behind", ())]))
    assert committed_values(node, RAW_TOPIC, 1, within_s=3) == []
    time.sleep(0.01)

    for scope in (["--topic", RAW_TOPIC], ["--broker-id", "1"]):
        code, found, _ = replog(
            node, capsys, "find-hanging", *scope, "--max-transaction-timeout", "0"
        )
        assert code == 0
        assert [(h["Topic"], h["Partition"], h["ProducerId"], h["StartOffset"]) for h in found] == [
            (RAW_TOPIC, "0", str(ORPHAN), "0")
        ]
    (hanging,) = found
    # A window longer than it has been open: no candidate.
    assert replog(node, capsys, "find-hanging", "--topic", RAW_TOPIC)[1] == []

    code, aborted, err = replog(
        node, capsys, "abort", "--topic", RAW_TOPIC, "--partition", "0",
        "--producer-id", hanging["ProducerId"], "--producer-epoch", hanging["ProducerEpoch"],
        "--coordinator-epoch", hanging["CoordinatorEpoch"],
    )  # fmt: skip
    assert code == 0, err
    assert aborted["coordinatorEpoch"] >= 0
    assert committed_values(node, RAW_TOPIC, 1) == [b"behind"]
    code, found, _ = replog(
        node, capsys, "find-hanging", "--topic", RAW_TOPIC, "--max-transaction-timeout", "0"
    )
    assert (code, found) == (0, [])


@pytest.mark.parametrize(
    ("words", "named"),
    [
        (["describe", "--transactional-id", "nobody"], "'nobody'"),
        (["abort", "--topic", "orders", "--partition", "0", "--start-offset", "12345"], "12345"),
        (["describe-producers", "--topic", "missing", "--partition", "0"], "missing"),
        (["describe-producers", "--topic", "orders", "--partition", "9"], "orders-9"),
        (["list", "--state", "Ongoing", "--state", "Bogus"], "'Bogus'"),
        (["find-hanging"], "--topic or --broker-id"),
        (["find-hanging", "--broker-id", "1", "--partition", "0"], "--partition needs --topic"),
        (["abort", "--topic", "orders", "--partition", "0"], "--start-offset"),
        (
            [
                "abort",
                "--topic",
                "orders",
                "--partition",
                "0",
                "--start-offset",
                "0",
                "--producer-id",
                "5",
            ],
            "not both",
        ),
        (
            ["abort", "--topic", "orders", "--partition", "0", "--producer-id", "5"],
            "--producer-epoch",
        ),
    ],
)
def test_bad_input_is_an_error_naming_what_was_wrong(
    node: RunningNode, capsys: pytest.CaptureFixture[str], words: list[str], named: str
) -> None:
    code, out, err = replog(node, capsys, *words)
    assert code == 1 and not out  # nothing listed or described
    assert named in err, err


def test_transactional_id_not_found_is_its_kafka_error(
    node: RunningNode, capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, err = replog(node, capsys, "describe", "--transactional-id", "nobody")
    assert "TRANSACTIONAL_ID_NOT_FOUND" in err or "TransactionalIdNotFound" in err, err


def test_the_tables_have_kafkas_columns(
    node: RunningNode, capsys: pytest.CaptureFixture[str]
) -> None:
    from replog.cli import transactions

    where = ["--bootstrap-server", node.kafka_address]
    for words, header in (
        (["list"], transactions.LIST_HEADER),
        (["describe-producers", "--topic", "orders", "--partition", "0"],
         transactions.PRODUCERS_HEADER),
        (["find-hanging", "--topic", "orders"], transactions.HANGING_HEADER),
    ):  # fmt: skip
        assert main(["transactions", *words, *where]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].split() == list(header)
    with open_transaction(node, "tables-tx", "orders", b"t") as tables:
        tables.abort_transaction(30)
    assert main(["transactions", "describe", "--transactional-id", "tables-tx", *where]) == 0
    first, row = capsys.readouterr().out.splitlines()
    assert first.split() == list(transactions.DESCRIBE_HEADER)
    # Aborted by its producer: the coordinator answers once PrepareAbort is written.
    cells = row.split()
    assert cells[1] == "tables-tx" and cells[4] in ("PrepareAbort", "CompleteAbort")
