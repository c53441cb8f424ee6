"""The quorum controller (pure): turns admin and broker requests into metadata records.

The active controller validates each request against its latest in-memory state, asks Raft for
the offsets the records will land at, replays them into timeline structures at once, and
answers only once Raft has committed those offsets. Standby controllers replay the committed
log into the same structures. See `controller.py` for the theory of operation, and
docs/design/kraft.md (#controller, #timeline, #broker-lifecycle) for the rules it follows.

Rules:
- Pure: no I/O, no clock (time arrives as `now_ms`), no threads, randomness only as an
  injected `random.Random`.
- Single-threaded: one owner drives a controller and every manager it holds.
- Durable state lives only in timeline structures tied to one `SnapshotRegistry`; soft state
  (heartbeat sessions) lives only on the active controller and is rebuilt on activation.
"""
