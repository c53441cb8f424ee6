"""confluent-kafka (librdkafka) producers that end with the block that made them.

A librdkafka handle runs threads of its own, which reconnect to its brokers until the handle is
destroyed. Left to Python, a producer is destroyed when its last reference goes: with the frame of
the test that made it, unless a reference cycle holds that frame (an exception kept by a future,
or by a `pytest.raises` result), and then only once the garbage collector next collects its oldest
generation, in a test process maybe long after the producer's cluster stopped, its threads all
the while logging to stderr that they cannot connect.

`Producer.close()` (confluent-kafka 2.16) does more than destroy the handle: it aborts an open
transaction first, waiting for the coordinator with no time limit, flushes with none either, and
when the abort fails (a fenced producer) its RuntimeWarning, an error under this suite's
`filterwarnings`, makes it raise SystemError. `confluent_producer` destroys the handle when its
block ends as freeing it does, by dropping the only reference to it: what it still holds unsent
is dropped, and its transaction left as it is. Only when something else still holds the handle
(a method of it on the stack of a frame that an exception's traceback keeps) is it closed
instead, after dropping what it holds unsent, and whatever the abort of its transaction says.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import confluent_kafka

__all__ = ["confluent_producer"]


class _Producer(confluent_kafka.Producer):
    """A confluent_kafka.Producer that weak references can name (its C type cannot be)."""


@contextmanager
def confluent_producer(config: dict[str, Any]) -> Iterator[Any]:
    """A confluent_kafka.Producer of `config`, destroyed when the block ends (module docstring).
    The block is given a weak proxy of it: this generator holds the only reference, however long
    the block's frame lives."""
    made = _Producer(config)
    alive = weakref.ref(made)
    try:
        yield weakref.proxy(made)
    finally:
        del made
        held = alive()
        if held is not None:
            held.purge()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                held.close()
