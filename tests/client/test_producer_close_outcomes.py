"""A producer closed at once (Ctrl-C in `replog produce` or `replog perf produce`) says of each
record it gives up on whether it may have been written: a batch it had sent (its answer lost
or not come) is "not acknowledged (may have been written)", one it never sent is "never
sent" (`ClientClosedError.maybe_written`): the first may well be in the log."""

from __future__ import annotations

import asyncio

import pytest
from producer_fakes import FakeCluster
from test_producer import Made, cluster, make, until  # noqa: F401 - fixtures

from replog.errors import ClientClosedError


@pytest.mark.asyncio
async def test_a_forced_close_tells_records_on_the_wire_from_records_never_sent(
    cluster: FakeCluster,  # noqa: F811
    make: Made,  # noqa: F811
) -> None:
    producer = make(batch_size=1, max_in_flight_requests_per_connection=1)
    await producer.send("one", b"warm-up")
    cluster.gate.close()
    on_wire = producer.send_nowait("one", b"a")
    await until(lambda: cluster.gate.held == 1)
    queued = producer.send_nowait("one", b"b")  # waits its turn behind the request held
    await producer.close(timeout_ms=0)
    outcomes = await asyncio.gather(on_wire, queued, return_exceptions=True)
    sent, unsent = outcomes
    assert isinstance(sent, ClientClosedError) and isinstance(unsent, ClientClosedError)
    assert sent.maybe_written and not unsent.maybe_written
    assert "one-0: 1 record(s) not acknowledged (may have been written)" in str(sent)
    assert "one-0: 1 record(s) never sent" in str(unsent)
