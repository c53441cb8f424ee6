"""The broker role of a node (`broker_runtime`): metadata replay and publishing, its
lifecycle against the controller (registration, heartbeats), producer id blocks, and the
wiring of the data plane, the group coordinator and the Kafka listener.
"""
