"""The group coordinator's shell on a broker: groups and committed offsets over the pure
`replog.coordinator`, stored in `__consumer_offsets` replicas, and that topic's
creation when a coordinator is first looked for.
"""
