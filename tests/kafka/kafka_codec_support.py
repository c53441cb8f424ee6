"""Hypothesis strategies for every generated Kafka message, built from the same specs the
generator reads (proto/kafka/message/ through proto/generate_kafka.py's model), and
kafka-python's classes of the same messages as a byte oracle."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from hypothesis import strategies as st

from replog.kafka.protocol.codec import Message

ROOT = Path(__file__).resolve().parents[2]


def load_generator() -> ModuleType:
    name = "replog_generate_kafka"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "proto" / "generate_kafka.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


GEN = load_generator()
SPECS: list[Any] = GEN.load_specs()
REQUEST_SPECS = [s for s in SPECS if s.kind == "request"]


def module_of(spec: Any) -> ModuleType:
    return importlib.import_module(f"replog.kafka.messages.{spec.module}")


def message_class(spec: Any) -> type[Message]:
    cls: type[Message] = getattr(module_of(spec), spec.name)
    return cls


def _value(f: Any, version: int, mod: ModuleType) -> st.SearchStrategy[Any]:
    """One element of field `f` (the array around it is added by `field_strategy`)."""
    if f.struct is not None:
        return struct_strategy(mod.__name__, f.struct.name, version)
    t = f.type
    if t in GEN.INT_RANGE:
        lo, hi = GEN.INT_RANGE[t]
        return st.integers(lo, hi)
    if t == "bool":
        return st.booleans()
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "string":
        return st.text(max_size=6)
    if t in ("bytes", "records"):
        return st.binary(max_size=12)
    if t == "uuid":
        return st.uuids()
    raise AssertionError(f"no strategy for {t}")


def field_strategy(f: Any, version: int, mod: ModuleType) -> st.SearchStrategy[Any]:
    inner = _value(f, version, mod)
    if f.is_array:
        inner = st.lists(inner, max_size=2 if f.struct is not None else 3)
    if f.nullable_in(version):
        inner = st.none() | inner
    return inner


@cache
def struct_strategy(module: str, struct_name: str, version: int) -> st.SearchStrategy[Any]:
    mod = importlib.import_module(module)
    spec = next(s for s in SPECS if f"replog.kafka.messages.{s.module}" == module)
    struct = spec.top if struct_name == spec.name else spec.structs[struct_name]
    kwargs = {
        f.attr: field_strategy(f, version, mod)
        for f in struct.fields
        if f.present(version) or f.tagged_in(version)
    }
    return st.builds(getattr(mod, struct_name), **kwargs)


def message_strategy(spec: Any, version: int) -> st.SearchStrategy[Any]:
    return struct_strategy(module_of(spec).__name__, spec.name, version)


@cache
def kafka_python_classes() -> dict[str, Any]:
    """kafka-python's ApiMessage classes by message name (its primary, unversioned ones)."""
    import kafka.protocol.admin
    import kafka.protocol.consumer
    import kafka.protocol.metadata
    import kafka.protocol.producer  # noqa: F401
    from kafka.protocol.api_message import ApiMessage

    found: dict[str, Any] = {}
    pending = list(ApiMessage.__subclasses__())
    while pending:
        cls = pending.pop()
        pending += cls.__subclasses__()
        if getattr(cls, "_class_version", None) is None and getattr(cls, "_json", None):
            found.setdefault(cls._json["name"], cls)
    return found


def kafka_python_reencode(name: str, data: bytes, version: int) -> bytes:
    """kafka-python decodes `data` and encodes it again at `version`."""
    cls = kafka_python_classes()[name]
    theirs = cls.decode(data, version=version)
    object.__setattr__(theirs, "_header", None)  # decode leaves it unset; encode reads it
    encoded: bytes = theirs.encode(version=version)
    return encoded
