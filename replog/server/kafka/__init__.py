"""The Kafka listener, every client's way in: connections (`kafka_listener`) and each
request's handler, translated to the broker's cores, the group coordinator or the
active controller; a controller's own Kafka listener (`kafka_controller_apis`).
"""
