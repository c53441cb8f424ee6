"""Kafka's log cleaner for compacted logs: the pure rules (`offset_map`, `cleanable`,
`grouping`, `transactions`, `batch_filter`), what they need of a `Log` (`log_summary`), and
one cleaning pass over a `Log` (`log_cleaning`), which swaps cleaned segments in crash-safely
(`replog.storage.segment_swap`).

Nothing here runs by itself or reads a clock: a caller picks a log (`cleanable.filthiest` over
`log_summary.summarize_log`), runs `log_cleaning.clean_log` off the event loop, and records
the offset it reached in the log dir's `cleaner-offset-checkpoint` (`cleaner_checkpoint`).
"""
