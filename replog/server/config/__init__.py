"""The node's settings, read from Kafka's property names and checked once at start-up:
the node as a whole (`node_config`), the data plane's and the group coordinator's.
"""
