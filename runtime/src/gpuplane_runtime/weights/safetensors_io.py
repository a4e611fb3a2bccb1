"""Reading and writing the safetensors format a piece at a time.

A safetensors file is an 8-byte little-endian header length, a JSON header (each tensor's dtype, shape and byte
range in the data section) and the raw row-major data. The runtime reads exactly the rows and columns a rank owns
with ``pread`` (no ``mmap``: mapped pages would count in the process's resident memory, and a column slice touches
every page of the tensor), through a bounded buffer, and writes a file tensor by tensor: the header first, then
each tensor's bytes as they are gathered, so no process ever holds a whole model.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import torch

from ..errors import CheckpointError

#: The largest read or write buffer, so that memory growth beyond a rank's own share stays bounded.
CHUNK_BYTES = 16 << 20
#: Headers larger than this are refused (the format's own reader caps them at 100 MB).
MAX_HEADER_BYTES = 100 << 20

DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
NAMES: dict[torch.dtype, str] = {v: k for k, v in DTYPES.items()}


@dataclass(frozen=True)
class TensorEntry:
    """Where one tensor lies: its file, dtype, shape and absolute byte offset of its data."""

    file: Path
    dtype: torch.dtype
    shape: tuple[int, ...]
    offset: int
    nbytes: int

    @property
    def itemsize(self) -> int:
        return torch.empty((), dtype=self.dtype).element_size()


def read_header(path: Path) -> tuple[dict[str, TensorEntry], dict[str, str]]:
    """The tensors of one file and its ``__metadata__``; a damaged header is a :class:`CheckpointError`."""
    try:
        with path.open("rb") as f:
            raw = f.read(8)
            if len(raw) != 8:
                raise CheckpointError(f"{path} is not a safetensors file (shorter than its 8-byte header length)")
            (length,) = struct.unpack("<Q", raw)
            if length > MAX_HEADER_BYTES:
                raise CheckpointError(f"{path} is not a safetensors file (header of {length} bytes)")
            header = json.loads(f.read(length))
        size = path.stat().st_size
    except OSError as err:
        raise CheckpointError(f"cannot read {path}: {err}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{path} is not a safetensors file (its header is not JSON: {err})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path} is not a safetensors file (its header is not an object)")
    data_start = 8 + length
    metadata = header.pop("__metadata__", None) or {}
    entries: dict[str, TensorEntry] = {}
    for name, info in header.items():
        try:
            dtype_name, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
            shape = tuple(int(n) for n in shape)
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"{path}: tensor `{name}` has a malformed header entry") from None
        dtype = DTYPES.get(dtype_name)
        if dtype is None:
            raise CheckpointError(
                f"{path}: tensor `{name}` is stored as {dtype_name}; the runtime loads F32, F16 and BF16 weights "
                "(quantized checkpoints are not supported)"
            )
        entry = TensorEntry(path, dtype, shape, data_start + int(begin), int(end) - int(begin))
        expected = entry.itemsize
        for n in shape:
            expected *= n
        if entry.nbytes != expected or data_start + int(end) > size:
            raise CheckpointError(f"{path}: tensor `{name}` does not fit its byte range (a truncated file?)")
        entries[name] = entry
    return entries, {str(k): str(v) for k, v in metadata.items()}


def _bytes(f: BinaryIO, offset: int, length: int) -> bytearray:
    buf = bytearray(length)
    view = memoryview(buf)
    done = 0
    while done < length:
        n = os.preadv(f.fileno(), [view[done:]], offset + done)
        if n <= 0:
            raise CheckpointError(f"{f.name}: unexpected end of file at byte {offset + done}")
        done += n
    return buf


def read_box(entry: TensorEntry, offsets: Sequence[int], out: torch.Tensor, f: BinaryIO) -> None:
    """Fill ``out`` with the box of ``entry`` that starts at ``offsets`` and has ``out``'s shape, converting
    the dtype. Reads whole rows of the first dimension a bounded block at a time (a box that spans every column
    reads only its own bytes)."""
    shape = entry.shape
    if len(offsets) != len(shape) or out.dim() != len(shape):
        raise CheckpointError(f"internal: box of rank {len(offsets)} for a tensor of shape {list(shape)}")
    if not shape:
        out.copy_(torch.frombuffer(_bytes(f, entry.offset, entry.nbytes), dtype=entry.dtype).reshape(()))
        return
    rows = out.shape[0]
    if rows == 0 or out.numel() == 0:
        return
    inner = list(shape[1:])
    row_elems = 1
    for n in inner:
        row_elems *= n
    row_bytes = row_elems * entry.itemsize
    block = max(1, CHUNK_BYTES // max(row_bytes, 1))
    rest = tuple(slice(o, o + n) for o, n in zip(offsets[1:], out.shape[1:], strict=True))
    for start in range(0, rows, block):
        n = min(block, rows - start)
        raw = _bytes(f, entry.offset + (offsets[0] + start) * row_bytes, n * row_bytes)
        piece = torch.frombuffer(raw, dtype=entry.dtype).reshape(n, *inner)
        out[start : start + n].copy_(piece[(slice(None), *rest)])


class SafetensorsWriter:
    """Writes one safetensors file tensor by tensor: the header is computed from the declared (name, dtype,
    shape) list, then :meth:`write` must be called for each tensor in that order."""

    def __init__(self, path: Path, tensors: Iterable[tuple[str, torch.dtype, Sequence[int]]], metadata: dict[str, str]):
        self.path = path
        self.order: list[tuple[str, torch.dtype, tuple[int, ...]]] = [(n, d, tuple(s)) for n, d, s in tensors]
        header: dict[str, object] = {"__metadata__": metadata}
        offset = 0
        for name, dtype, shape in self.order:
            nbytes = torch.empty((), dtype=dtype).element_size()
            for n in shape:
                nbytes *= n
            header[name] = {"dtype": NAMES[dtype], "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
            offset += nbytes
        encoded = json.dumps(header, separators=(",", ":")).encode()
        encoded += b" " * (-len(encoded) % 8)  # the data section starts 8-byte aligned, as the format's writer does
        self.total_bytes = 8 + len(encoded) + offset
        self._next = 0
        self._file: BinaryIO = path.open("wb")
        self._file.write(struct.pack("<Q", len(encoded)))
        self._file.write(encoded)

    def write(self, name: str, tensor: torch.Tensor) -> None:
        expected, dtype, shape = self.order[self._next]
        if name != expected or tuple(tensor.shape) != shape:
            raise RuntimeError(f"internal: wrote {name} {list(tensor.shape)}, expected {expected} {list(shape)}")
        data = tensor.detach().to(device="cpu", dtype=dtype).contiguous().reshape(-1)
        raw = data.view(torch.uint8) if data.numel() else data
        step = max(1, CHUNK_BYTES)
        flat = raw.numpy() if raw.numel() else b""
        for start in range(0, len(flat), step):
            self._file.write(memoryview(flat[start : start + step]))  # type: ignore[arg-type]
        self._next += 1

    def close(self) -> None:
        if self._next != len(self.order):
            self._file.close()
            raise RuntimeError(f"internal: {self.path} closed after {self._next} of {len(self.order)} tensors")
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
