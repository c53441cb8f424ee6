"""The whole-cluster simulator's machinery: replog's real shells run under one seed, on a
virtual clock (`virtual_loop`)."""
