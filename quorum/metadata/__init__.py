"""Cluster metadata: the records of the metadata log and the images built by replaying them."""
