"""Record-batch compression codecs, chosen by the low three bits of the batch attributes.

When a batch is compressed, everything after the 61-byte header (all records, back to back) is
one compressed blob; the header itself is never compressed. The codec ids and their framing:

    0 none
    1 gzip    RFC 1952 members (the stdlib `zlib`); level 6, Java's default, and mtime 0 so
              that the same records always give the same bytes
    2 snappy  Xerial framing, as Java's snappy-java writes it: the 16-byte header
              82 'SNAPPY' 00 | int32 version 1 | int32 compatible version 1, then blocks of
              int32 compressed length + raw snappy block (32 KiB of input each); readers also
              accept one unframed raw snappy block. Only when the `snappy` package imports.
    3 lz4     the LZ4 *frame* format (magic 04 22 4d 18), written as Kafka's Java producer
              writes it: independent 64 KiB blocks, no content size, no content checksum.
              Only when the `lz4` package imports.
    4 zstd    zstd frames at level 3 (Kafka's default). Only when `zstandard` imports.

Worked example: `compress(COMPRESSION_GZIP, b"a" * 1000)` is 29 bytes starting ``1f 8b 08 00 00
00 00 00``; `decompress(COMPRESSION_GZIP, that)` gives the 1000 bytes back.

Rules:
- A codec that is unknown (5-7) or whose package is missing raises
  `UnsupportedCompressionTypeError` naming the codec.
- Decompression never produces more than `decompressed_bytes_max` bytes (default 64 MiB): the
  output is produced in bounded steps and the call stops as soon as it passes the cap, raising
  `InvalidRecordError`, so a few kilobytes of "zip bomb" cannot claim gigabytes. 64 MiB is
  64x Kafka's default `max.message.bytes`: generous for real batches, small for one process.
  Peak memory stays near twice the output (the chunks plus their join), so near twice the cap
  for a bomb, measured at 1.1-2.7x the cap for 200 MiB of zeros squeezed into 6-870 KB.
- A blob the codec cannot decode (garbage, truncated, trailing junk) raises
  `CorruptRecordError` naming the codec and what went wrong.
"""

from __future__ import annotations

import importlib
import struct
import zlib
from collections.abc import Callable
from typing import Any

from replog.errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionTypeError


def _optional_module(name: str) -> Any:
    """The module, or None when its package is not installed here."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


lz4_frame = _optional_module("lz4.frame")
zstandard = _optional_module("zstandard")
snappy = _optional_module("snappy")  # python-snappy: raw snappy blocks

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4

CODEC_NAMES: dict[int, str] = {
    COMPRESSION_NONE: "none",
    COMPRESSION_GZIP: "gzip",
    COMPRESSION_SNAPPY: "snappy",
    COMPRESSION_LZ4: "lz4",
    COMPRESSION_ZSTD: "zstd",
}

DECOMPRESSED_BYTES_MAX_DEFAULT = 64 * 1024 * 1024

GZIP_LEVEL = 6
ZSTD_LEVEL = 3
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # gzip wrapper, 32 KiB window
# Output cap of one lz4 step. python-lz4 allocates `max_length` bytes up front, so a cap of the
# whole budget would allocate 64 MiB for every small batch.
_LZ4_STEP_BYTES_MAX = 1 << 20
# One zstd input byte can expand to at most about 2**15 output bytes (a 4-byte RLE block
# yields a full 128 KiB block). Feeding at most budget >> 15 input bytes per step therefore keeps
# each step's output near the remaining budget: python-zstandard has no output cap of its own.
_ZSTD_EXPANSION_SHIFT = 15
_ZSTD_STEP_INPUT_MIN = 64
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_BYTES = 32 * 1024
_INT32 = struct.Struct(">i")

Blob = bytes | bytearray | memoryview


def codec_name(codec: int) -> str:
    """A codec's Kafka name (`compression.type` value), or ``unknown codec id N``."""
    return CODEC_NAMES.get(codec, f"unknown codec id {codec}")


def is_codec_available(codec: int) -> bool:
    """Whether this process can compress and decompress with `codec`."""
    if codec in (COMPRESSION_NONE, COMPRESSION_GZIP):
        return True
    if codec == COMPRESSION_LZ4:
        return lz4_frame is not None
    if codec == COMPRESSION_ZSTD:
        return zstandard is not None
    if codec == COMPRESSION_SNAPPY:
        return snappy is not None
    return False


def available_codecs() -> frozenset[int]:
    """The codec ids `compress` and `decompress` accept in this process."""
    return frozenset(codec for codec in CODEC_NAMES if is_codec_available(codec))


def require_codec(codec: int, where: str = "batch") -> None:
    """Raise `UnsupportedCompressionTypeError` unless `codec` is usable here."""
    if not is_codec_available(codec):
        reason = "is not a Kafka codec" if codec not in CODEC_NAMES else "has no package here"
        raise UnsupportedCompressionTypeError(
            f"{where}: compression codec {codec} ({codec_name(codec)}) {reason}; "
            f"available: {', '.join(CODEC_NAMES[c] for c in sorted(available_codecs()))}"
        )


def compress(codec: int, data: Blob) -> bytes:
    """The compressed blob of `data` (all records of a batch) for `codec`."""
    require_codec(codec)
    if codec == COMPRESSION_NONE:
        return bytes(data)
    if codec == COMPRESSION_GZIP:
        compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, _GZIP_WBITS)
        return compressor.compress(data) + compressor.flush()
    if codec == COMPRESSION_LZ4:
        compressed: bytes = lz4_frame.compress(
            data,
            block_size=lz4_frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
        return compressed
    if codec == COMPRESSION_ZSTD:
        compressed = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(data)
        return compressed
    return _xerial_compress(data)


def decompress(
    codec: int,
    blob: Blob,
    decompressed_bytes_max: int = DECOMPRESSED_BYTES_MAX_DEFAULT,
    *,
    where: str = "batch",
) -> bytes:
    """The records bytes inside `blob`, never more than `decompressed_bytes_max` of them."""
    require_codec(codec, where)
    if codec == COMPRESSION_NONE:
        return bytes(blob)
    output = _BoundedOutput(decompressed_bytes_max, codec, where)
    try:
        _DECODERS[codec](blob, output)
    except _CODEC_ERRORS as error:
        raise output.corrupt(str(error)) from error
    return output.join()


class _BoundedOutput:
    """Collects decompressed chunks and enforces the output cap after every step."""

    __slots__ = ("chunks", "codec", "limit", "size", "where")

    def __init__(self, limit: int, codec: int, where: str) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.limit = limit
        self.codec = codec
        self.where = where

    @property
    def room(self) -> int:
        """How many more bytes may come, plus one so that an overflow is observable."""
        return self.limit - self.size + 1

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.limit:
            raise self.too_large()
        if chunk:
            self.chunks.append(chunk)

    def too_large(self) -> InvalidRecordError:
        return InvalidRecordError(
            f"{self.where}: {codec_name(self.codec)} records decompress to more than "
            f"decompressed_bytes_max={self.limit} bytes; raise the limit if the batch is genuine"
        )

    def corrupt(self, reason: str) -> CorruptRecordError:
        return CorruptRecordError(
            f"{self.where}: corrupt {codec_name(self.codec)} records blob: {reason}"
        )

    def join(self) -> bytes:
        return self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)


def _gzip_decompress(blob: Blob, output: _BoundedOutput) -> None:
    # Java's GZIPInputStream reads concatenated members, so every member is decoded in turn.
    pending: Blob = blob
    while pending:
        decoder = zlib.decompressobj(_GZIP_WBITS)
        while True:
            # max_length is at least 1 here: 0 would mean "unlimited" to zlib.
            output.add(decoder.decompress(pending, output.room))
            pending = decoder.unconsumed_tail
            if decoder.eof:
                pending = decoder.unused_data
                break
            if not pending:
                raise output.corrupt("stream ends inside a gzip member")


def _lz4_decompress(blob: Blob, output: _BoundedOutput) -> None:
    decoder = lz4_frame.LZ4FrameDecompressor()
    pending: Blob = blob
    while True:
        step = min(output.room, _LZ4_STEP_BYTES_MAX)
        output.add(decoder.decompress(pending, max_length=step))
        pending = b""
        if decoder.eof:
            # The decoder resets itself at a frame end; a following frame continues the data.
            pending = decoder.unused_data
            if not pending:
                return
        elif decoder.needs_input:
            raise output.corrupt("stream ends inside an lz4 frame")


def _zstd_decompress(blob: Blob, output: _BoundedOutput) -> None:
    view = memoryview(blob)
    context = zstandard.ZstdDecompressor()
    cursor = 0
    while cursor < len(view):
        decoder = context.decompressobj()  # one frame; frames may follow each other
        while True:
            step_end = min(
                len(view), cursor + max(_ZSTD_STEP_INPUT_MIN, output.room >> _ZSTD_EXPANSION_SHIFT)
            )
            output.add(decoder.decompress(view[cursor:step_end]))
            cursor = step_end
            if decoder.eof:
                cursor -= len(decoder.unused_data)
                break
            if cursor == len(view):
                raise output.corrupt("stream ends inside a zstd frame")


def _xerial_compress(data: Blob) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK_BYTES):
        block: bytes = snappy.compress(bytes(view[start : start + _XERIAL_BLOCK_BYTES]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(blob: Blob, output: _BoundedOutput) -> None:
    data = bytes(blob)
    if not data.startswith(_XERIAL_MAGIC):
        _snappy_block(data, output)
        return
    if len(data) < len(_XERIAL_HEADER):
        raise output.corrupt("xerial header is cut short")
    cursor = len(_XERIAL_HEADER)
    while cursor < len(data):
        if cursor + 4 > len(data):
            raise output.corrupt(f"xerial block length at byte {cursor} is cut short")
        (block_size,) = _INT32.unpack_from(data, cursor)
        cursor += 4
        if block_size < 0 or cursor + block_size > len(data):
            raise output.corrupt(f"xerial block of {block_size} bytes at byte {cursor} overruns")
        _snappy_block(data[cursor : cursor + block_size], output)
        cursor += block_size


def _snappy_block(block: bytes, output: _BoundedOutput) -> None:
    # A raw snappy block starts with its uncompressed length as an unsigned base-128 varint,
    # so the cap is checked before the codec allocates anything.
    declared = 0
    for index, byte in enumerate(block[:5]):
        declared |= (byte & 0x7F) << (7 * index)
        if byte < 0x80:
            break
    else:
        raise output.corrupt("raw snappy block has no valid length preamble")
    if declared >= output.room:
        raise output.too_large()
    output.add(snappy.uncompress(block))


_DECODERS: dict[int, Callable[[Blob, _BoundedOutput], None]] = {
    COMPRESSION_GZIP: _gzip_decompress,
    COMPRESSION_LZ4: _lz4_decompress,
    COMPRESSION_ZSTD: _zstd_decompress,
    COMPRESSION_SNAPPY: _snappy_decompress,
}
# What each codec library raises for bytes it cannot decode (python-lz4 raises RuntimeError).
_CODEC_ERRORS: tuple[type[Exception], ...] = tuple(
    error
    for error in (
        zlib.error,
        RuntimeError,
        ValueError,
        getattr(zstandard, "ZstdError", None),
        getattr(snappy, "UncompressError", None),
    )
    if error is not None
)
