"""The committed-offsets cache and its replay from log batches: the latest record per key
wins whatever order records are applied in, tombstones delete, and replay skips what is not
an offset commit without losing the rest; removed entries (a deleted topic's, expired ones)
leave no mark, and an entry expires `offsets.retention.minutes` after its commit."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from replog.coordinator.offsets_cache import (
    CommittedOffset,
    OffsetsCache,
    ReplayStats,
    expired,
    replay_batches,
)
from replog.coordinator.offsets_records import (
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_value,
)
from replog.record.builder import build_batch
from replog.record.compression import COMPRESSION_GZIP

T0 = 1_700_000_000_000


def value(offset: int, metadata: str = "") -> OffsetCommitValue:
    return OffsetCommitValue(offset, -1, metadata, T0)


def test_commits_and_lookups_per_group() -> None:
    cache = OffsetsCache()
    cache.replay(OffsetCommitKey("g1", "t", 0), value(5), 0)
    cache.replay(OffsetCommitKey("g1", "t", 1), value(6), 1)
    cache.replay(OffsetCommitKey("g2", "t", 0), value(7), 2)
    assert cache.committed("g1") == {("t", 0): value(5), ("t", 1): value(6)}
    assert cache.committed("g1", [("t", 1), ("t", 9), ("u", 0)]) == {
        ("t", 1): value(6),
        ("t", 9): None,
        ("u", 0): None,
    }
    assert cache.committed("nobody") == {}
    assert cache.groups() == ["g1", "g2"] and len(cache) == 3


def test_a_tombstone_deletes_and_an_older_record_never_wins() -> None:
    cache = OffsetsCache()
    key = OffsetCommitKey("g", "t", 0)
    assert cache.replay(key, value(5), 10)
    assert not cache.replay(key, value(4), 9)  # acknowledged late, but older in the log
    assert cache.committed("g") == {("t", 0): value(5)}
    assert cache.replay(key, None, 11)
    assert cache.committed("g") == {} and cache.groups() == []
    assert not cache.replay(key, value(3), 10)  # older than the tombstone
    assert cache.committed("g") == {}
    assert cache.replay(key, value(8), 12)
    assert cache.committed("g") == {("t", 0): value(8)}


def test_remove_returns_the_removed_keys_and_leaves_no_mark() -> None:
    cache = OffsetsCache()
    cache.replay(OffsetCommitKey("g1", "t", 1), value(5), 10)
    cache.replay(OffsetCommitKey("g1", "t", 0), value(6), 11)
    cache.replay(OffsetCommitKey("g1", "u", 0), value(7), 12)
    cache.replay(OffsetCommitKey("g2", "t", 0), value(8), 13)
    removed = cache.remove(lambda key, _entry: key.topic == "t")
    assert removed == [  # in the cache's order
        OffsetCommitKey("g1", "t", 1),
        OffsetCommitKey("g1", "t", 0),
        OffsetCommitKey("g2", "t", 0),
    ]
    assert cache.committed("g1") == {("u", 0): value(7)}
    assert cache.groups() == ["g1"] and len(cache) == 1
    assert not cache.has(OffsetCommitKey("g1", "t", 0)) and cache.has(OffsetCommitKey("g1", "u", 0))
    assert cache.remove(lambda key, entry: entry.record_offset > 100) == []
    # No mark is kept (expiry must not grow memory with every group ever seen): the key is as
    # if never committed, and the shell replays no older record of it afterwards.
    assert cache.replay(OffsetCommitKey("g1", "t", 0), value(4), 9)
    assert cache.committed("g1", [("t", 0)]) == {("t", 0): value(4)}
    # The replay rules still hold for what is replayed: a newer commit wins, a tombstone
    # replayed later than a newer commit does not undo it.
    assert cache.replay(OffsetCommitKey("g1", "t", 0), value(9), 20)
    assert not cache.replay(OffsetCommitKey("g1", "t", 0), None, 19)
    assert cache.committed("g1", [("t", 0)]) == {("t", 0): value(9)}


def test_remove_topics_removes_only_those_topics_of_every_group() -> None:
    cache = OffsetsCache()
    cache.replay(OffsetCommitKey("g1", "t", 1), value(5), 10)
    cache.replay(OffsetCommitKey("g1", "u", 0), value(6), 11)
    cache.replay(OffsetCommitKey("g2", "t", 0), value(7), 12)
    cache.replay(OffsetCommitKey("g2", "v", 0), value(8), 13)
    cache.replay(OffsetCommitKey("g3", "v", 0), value(9), 14)
    cache.replay(OffsetCommitKey("g3", "v", 0), None, 15)  # a tombstone leaves the index too
    assert cache.remove_topics({"v", "t", "nope"}) == [
        OffsetCommitKey("g1", "t", 1),
        OffsetCommitKey("g2", "t", 0),
        OffsetCommitKey("g2", "v", 0),
    ]
    assert cache.groups() == ["g1"] and cache.committed("g1") == {("u", 0): value(6)}
    assert cache.remove_topics(["t", "v"]) == []
    cache.replay(OffsetCommitKey("g2", "t", 0), value(1), 16)  # committed again
    assert cache.remove_topics(["t"]) == [OffsetCommitKey("g2", "t", 0)]


def test_an_offset_expires_retention_ms_after_its_commit_timestamp() -> None:
    entry = CommittedOffset(value(5), 0)
    assert not expired(entry, T0 + 999, 1000)
    assert expired(entry, T0 + 1000, 1000)
    assert not expired(entry, T0 - 5000, 1000)  # the wall clock went back


keys = st.builds(
    OffsetCommitKey,
    st.sampled_from(["g1", "g2", "g3"]),
    st.sampled_from(["a", "b"]),
    st.integers(0, 2),
)
records = st.lists(
    st.tuples(keys, st.one_of(st.none(), st.integers(0, 1000).map(value))), max_size=40
)


@given(records, st.randoms(use_true_random=False))
def test_any_apply_order_gives_the_latest_record_per_key(
    log: list[tuple[OffsetCommitKey, OffsetCommitValue | None]], rng: random.Random
) -> None:
    latest: dict[OffsetCommitKey, OffsetCommitValue | None] = {}
    for key, record_value in log:
        latest[key] = record_value
    order = list(enumerate(log))
    rng.shuffle(order)
    cache = OffsetsCache()
    for offset, (key, record_value) in order:
        cache.replay(key, record_value, offset)
    for group in ("g1", "g2", "g3"):
        expected = {
            (k.topic, k.partition): v
            for k, v in sorted(latest.items(), key=lambda kv: (kv[0].topic, kv[0].partition))
            if k.group == group and v is not None
        }
        assert cache.committed(group) == expected
    # The index by topic agrees with the entries.
    assert set(cache.remove_topics(["a"])) == {
        k for k, v in latest.items() if k.topic == "a" and v is not None
    }
    assert all(key.topic == "b" for key in cache.remove(lambda _key, _entry: True))


def commit_record(
    group: str, topic: str, partition: int, offset: int | None
) -> tuple[int, bytes | None, bytes | None, tuple[()]]:
    key = encode_key(OffsetCommitKey(group, topic, partition))
    return (T0, key, None if offset is None else encode_value(value(offset)), ())


def test_replay_of_batches_keeps_the_latest_per_key_and_skips_the_rest() -> None:
    batches = b"".join(
        [
            build_batch([commit_record("g", "t", 0, 1), commit_record("g", "t", 1, 1)]),
            build_batch(
                [commit_record("g", "t", 0, 2), (T0, None, b"no key", ())],
                base_offset=2,
                compression=COMPRESSION_GZIP,
            ),
            # A transaction marker: a control batch, never an offset.
            build_batch(
                [(T0, b"\x00\x00\x00\x00", b"\x00\x00", ())], base_offset=4, is_control=True
            ),
            build_batch(
                [
                    (T0, b"\x00\x02\x00\x01g", b"group membership", ()),
                    (T0, b"\x00\x09garbage", b"x", ()),
                    commit_record("g", "t", 1, None),
                    (T0, encode_key(OffsetCommitKey("h", "t", 0)), b"\x00\x03short", ()),
                    commit_record("h", "t", 0, 9),
                ],
                base_offset=5,
            ),
        ]
    )
    cache = OffsetsCache()
    stats = ReplayStats()
    next_offset = replay_batches(cache, batches, stats, "__consumer_offsets-0")
    assert next_offset == 10
    assert cache.committed("g") == {("t", 0): value(2)}
    assert cache.committed("h") == {("t", 0): value(9)}
    assert (stats.records, stats.applied, stats.skipped) == (9, 5, 4)
    assert any("without a key" in r for r in stats.reasons)
    assert any("group membership record of group 'g'" in r for r in stats.reasons)
    assert any("unknown key version 9" in r for r in stats.reasons)
    assert any(r.startswith("offset 8") and "end inside the offset" in r for r in stats.reasons)
