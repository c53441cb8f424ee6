"""The group coordinator's decisions: the `__consumer_offsets` record format, which partition
keeps a group, the committed-offsets cache and the commit rules. Pure: no I/O, clock or
concurrency (the shell is `replog/server/groups/group_coordinator.py`)."""
