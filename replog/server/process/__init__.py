"""One node process: the composition root that wires the roles together (`node`), which
`server.properties` keys it reads, and its state as Prometheus gauges.
"""
