"""What every role of a node process runs on: the node's one TaskGroup and the event
loop's turns, the bulk worker threads, the garbage collector and allocator settings, the
open-file limit, the loop stall sampler, and serving and dialling gRPC calls.
Imports no other sub-package of replog.server.
"""
