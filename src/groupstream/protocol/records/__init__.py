"""RecordBatch v2: the unit the broker stores and moves without re-encoding."""

from groupstream.protocol.records.batch import (
    BatchBuilder,
    RecordBatch,
    build_control_batch,
    complete_batches_size,
    iter_record_batches,
    validate_batch,
)
from groupstream.protocol.records.batch_header import (
    BatchHeader,
    iter_batches,
    parse_header,
    patch_base_offset,
)
from groupstream.protocol.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Codec,
    codec_from_name,
    compress,
    decompress,
)
from groupstream.protocol.records.record import ControlType, EndTxnMarker, Record

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "BatchBuilder",
    "BatchHeader",
    "Codec",
    "ControlType",
    "EndTxnMarker",
    "Record",
    "RecordBatch",
    "build_control_batch",
    "codec_from_name",
    "complete_batches_size",
    "compress",
    "decompress",
    "iter_batches",
    "iter_record_batches",
    "parse_header",
    "patch_base_offset",
    "validate_batch",
]
