"""Kafka's RecordBatch v2 (magic 2): header, records, varints, compression, builder, parser.

Pure code: bytes in, bytes or values out; no I/O, clock or randomness. The header module is the
broker's hot path (frame, validate, stamp in place); `RecordBatch` and `BatchBuilder` are for
code that needs the records themselves (clients, tests, dump tools).
"""

from replog.record.batch import RecordBatch, iter_batches
from replog.record.builder import BatchBuilder, BatchOptions, RecordInput, build_batch
from replog.record.compression import (
    CODEC_NAMES,
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    DECOMPRESSED_BYTES_MAX_DEFAULT,
    available_codecs,
    codec_name,
    compress,
    decompress,
    is_codec_available,
)
from replog.record.header import (
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    compute_crc,
    iter_frames,
    read_frame,
    read_header,
    stamp_batch,
    validate_batch,
)
from replog.record.record import Header, Record

__all__ = [
    "CODEC_NAMES",
    "COMPRESSION_GZIP",
    "COMPRESSION_LZ4",
    "COMPRESSION_NONE",
    "COMPRESSION_SNAPPY",
    "COMPRESSION_ZSTD",
    "DECOMPRESSED_BYTES_MAX_DEFAULT",
    "LOG_OVERHEAD",
    "MAGIC_V2",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_TIMESTAMP",
    "RECORD_BATCH_OVERHEAD",
    "BatchBuilder",
    "BatchHeader",
    "BatchOptions",
    "Header",
    "Record",
    "RecordBatch",
    "RecordInput",
    "available_codecs",
    "build_batch",
    "codec_name",
    "compress",
    "compute_crc",
    "decompress",
    "is_codec_available",
    "iter_batches",
    "iter_frames",
    "read_frame",
    "read_header",
    "stamp_batch",
    "validate_batch",
]
