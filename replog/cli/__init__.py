"""The `replog` command-line tool (`replog.cli.main`).

Importing this package chooses gRPC's polling engine, with its fork handlers off, before
anything imports grpc: for the tool and for every node it spawns (replog/wire/grpc_engine.py says
why, and when an operator's choice is kept instead).
"""

from replog.wire.grpc_engine import choose_grpc_engine

choose_grpc_engine()
