"""Blocking clients a script never closed, at the interpreter's exit (replog/client/loop_thread.py
and replog/client/sync_producer.py): each script runs in its own interpreter against the fake
clusters of tests/client, and the test reads what that interpreter printed as it exited.

Before the exit hooks, the daemon loop thread was frozen with its tasks pending and Python
printed "Task was destroyed but it is pending!" for each; a producer's undelivered records were
lost without a word.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

TESTS_CLIENT = Path(__file__).parent

PRELUDE = """
import sys
sys.path.insert(0, {path!r})
import pytest
"""


# A script's blocking producers talk to this fake cluster, which holds topic "t".
PRODUCER_FAKE = """
from producer_fakes import FakeCluster, producer_settings
from replog.client.sync_producer import Producer
fake = FakeCluster()
fake.create("t", 1)
fake.install(pytest.MonkeyPatch())
"""


def exit_output(body: str) -> str:
    """What a script printed on stderr by the time its interpreter exited (it must exit 0);
    `{producer_fake}` in `body` stands for PRODUCER_FAKE."""
    body = textwrap.dedent(body).replace("{producer_fake}", PRODUCER_FAKE)
    script = PRELUDE.format(path=str(TESTS_CLIENT)) + body
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stderr


def test_a_producer_never_closed_exits_quietly_when_everything_was_delivered() -> None:
    stderr = exit_output(
        """
        {producer_fake}
        producer = Producer(producer_settings(fake))
        producer.send("t", b"a").get(10)
        """
    )
    assert stderr == ""


def test_a_producer_never_closed_says_how_many_records_it_had_not_delivered() -> None:
    stderr = exit_output(
        """
        {producer_fake}
        producer = Producer(producer_settings(fake, linger_ms=60_000))
        for value in (b"a", b"b", b"c"):
            producer.send("t", value)
        """
    )
    assert "Task was destroyed" not in stderr
    assert "was never closed" in stderr
    assert "3 record(s) it had not delivered" in stderr
    assert "call flush() or close()" in stderr


def test_a_consumer_and_an_admin_never_closed_exit_quietly() -> None:
    stderr = exit_output(
        """
        from consumer_fakes import FakeCluster, consumer_settings
        from replog import Admin, TopicPartition
        from replog.client.sync_consumer import Consumer
        fake = FakeCluster()
        fake.create("t", 1)
        fake.append("t", 0, [b"a"])
        fake.install(pytest.MonkeyPatch())
        consumer = Consumer(**consumer_settings(fake))
        consumer.assign([TopicPartition("t", 0)])
        records = {}
        for _ in range(50):
            records = consumer.poll(100)
            if records:
                break
        assert records
        admin = Admin(bootstrap_servers="127.0.0.1:1")
        """
    )
    assert stderr == ""


def test_a_producer_collected_unclosed_still_says_what_it_had_not_delivered() -> None:
    # The hook holds the producer strongly: held weakly, a producer made in a function and
    # never closed would be collected when it returned, its lost records unreported.
    stderr = exit_output(
        """
        import gc
        {producer_fake}

        def main():
            producer = Producer(producer_settings(fake, linger_ms=60_000))
            producer.send("t", b"a")
            producer.send("t", b"b")

        main()
        gc.collect()
        """
    )
    assert "2 record(s) it had not delivered" in stderr
    assert "Task was destroyed" not in stderr


def test_a_forked_child_of_a_process_with_an_open_producer_exits_at_once() -> None:
    # A forked child (gunicorn --preload, multiprocessing's fork) does not have the parent's
    # loop thread: an exit hook waiting for it would hang the child.
    stderr = exit_output(
        """
        import os, sys, time
        {producer_fake}
        producer = Producer(producer_settings(fake))
        producer.send("t", b"a").get(10)
        child = os.fork()
        if child == 0:
            sys.exit(0)  # runs the exit hooks in the child
        started = time.monotonic()
        while time.monotonic() - started < 10:
            done, status = os.waitpid(child, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(child, 9)
            raise SystemExit("the forked child did not exit within 10 s")
        producer.close()
        """
    )
    assert "did not exit" not in stderr
