"""The `replog` command-line tool (`replog.cli.main`).

Importing this package selects gRPC's polling engine before anything imports grpc, for the
tool and for every node it spawns (replog/grpc_engine.py says why and when it is kept off).
"""

from replog.grpc_engine import select_poll_engine

select_poll_engine()
