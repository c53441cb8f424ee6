"""Shells: asyncio + gRPC processes that drive the pure cores and own the I/O."""
