"""Hypothesis strategies for the Broker's protobuf messages, for the tests of the code that
reads them by hand (`replog.wire.record_wire`)."""

from __future__ import annotations

from hypothesis import strategies as st

from replog.pb import broker_pb2 as pb

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
# Short texts, and only the wire types protobuf's parse may keep as unknown fields.
TEXT = st.text(max_size=6)


@st.composite
def fetch_responses(draw: st.DrawFn) -> pb.FetchResponse:
    message = pb.FetchResponse()
    for _ in range(draw(st.integers(0, 3))):
        topic = message.topics.add(
            topic=draw(TEXT), topic_id=draw(st.sampled_from([b"", bytes(range(16)), b"\xff"]))
        )
        for _ in range(draw(st.integers(0, 3))):
            p = topic.partitions.add(
                partition=draw(INT32),
                high_watermark=draw(INT64),
                last_stable_offset=draw(INT64),
                log_start_offset=draw(INT64),
                records=draw(st.binary(max_size=300)),
                log_end_offset=draw(INT64),
            )
            if draw(st.booleans()):
                p.error.code = draw(INT32)
                p.error.error_name = draw(TEXT)
                p.error.message = draw(TEXT)
            if draw(st.booleans()):
                p.diverging_epoch.leader_epoch = draw(INT32)
                p.diverging_epoch.end_offset = draw(INT64)
            if draw(st.booleans()):
                p.current_leader.leader_id = draw(INT32)
                p.current_leader.leader_epoch = draw(INT32)
    return message
