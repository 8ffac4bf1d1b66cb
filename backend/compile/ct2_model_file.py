"""Reads CTranslate2's `model.bin` (the file `ctranslate2.specs.ModelSpec.save` writes) into numpy arrays.

Layout, all integers little-endian (binary version 6, the one CTranslate2 4.x writes):

  u32 binary_version                      only 6 is read; anything else is refused by number
  str spec_name                           e.g. "WhisperSpec"
  u32 spec_revision                       the spec's own layout revision (WhisperSpec: 3)
  u32 variable_count
  variable_count x:
    str name                              "encoder/layer_0/self_attention/linear_0/weight"
    u8  rank, rank x u32 dims             rank 0 = a scalar (spec flags such as decoder/pre_norm)
    u8  dtype                             0 float32, 1 int8, 2 int16, 3 int32, 4 float16, 5 bfloat16
    u32 byte_count, then the bytes        row-major
  u32 alias_count
  alias_count x: str alias, str target    a variable stored once under two names (tied weights)

  str = u16 length including a trailing NUL, the UTF-8 bytes, the NUL.

read_model() checks every length against the file size, the dtype against its table, byte_count against the shape,
and that nothing follows the aliases, so a truncated or foreign file is refused with what and where, never misread.
"""
import struct
from typing import Dict, Tuple

import numpy as np

SUPPORTED_BINARY_VERSION = 6
# Index = CTranslate2's DataType code. bfloat16 has no numpy dtype: read as uint16 and widened in _to_array.
DTYPES = [np.float32, np.int8, np.int16, np.int32, np.float16, "bfloat16"]
DTYPE_NAMES = ["float32", "int8", "int16", "int32", "float16", "bfloat16"]


class Ct2FormatError(ValueError):
    pass


class _Reader:
    def __init__(self, data: bytes, path: str):
        self.data, self.pos, self.path = data, 0, path

    def take(self, n: int, what: str) -> bytes:
        if self.pos + n > len(self.data):
            raise Ct2FormatError(f"{self.path}: truncated at byte {self.pos} reading {what} "
                                 f"({n} bytes wanted, {len(self.data) - self.pos} left)")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u8(self, what: str) -> int:
        return self.take(1, what)[0]

    def u16(self, what: str) -> int:
        return struct.unpack("<H", self.take(2, what))[0]

    def u32(self, what: str) -> int:
        return struct.unpack("<I", self.take(4, what))[0]

    def string(self, what: str) -> str:
        n = self.u16(what + " length")
        raw = self.take(n, what)
        if n == 0 or raw[-1] != 0:
            raise Ct2FormatError(f"{self.path}: {what} at byte {self.pos - n} is not NUL-terminated")
        return raw[:-1].decode("utf-8")


def _to_array(raw: bytes, dtype_id: int, shape: Tuple[int, ...]) -> np.ndarray:
    if DTYPES[dtype_id] == "bfloat16":
        bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape)
    return np.frombuffer(raw, dtype=np.dtype(DTYPES[dtype_id]).newbyteorder("<")).reshape(shape)


def read_model(path: str) -> Tuple[str, int, Dict[str, np.ndarray], Dict[str, str]]:
    """(spec_name, spec_revision, variables, aliases) of a CTranslate2 model.bin. Scalars come back as 0-d arrays;
    aliases map alias name -> stored variable name (not resolved here)."""
    with open(path, "rb") as f:
        r = _Reader(f.read(), path)
    version = r.u32("binary version")
    if version != SUPPORTED_BINARY_VERSION:
        raise Ct2FormatError(f"{path}: CTranslate2 binary version {version} is not supported (only "
                             f"{SUPPORTED_BINARY_VERSION}); re-save the model with CTranslate2 4.x")
    spec = r.string("spec name")
    revision = r.u32("spec revision")
    count = r.u32("variable count")
    variables: Dict[str, np.ndarray] = {}
    for k in range(count):
        name = r.string(f"name of variable {k}")
        rank = r.u8(f"rank of {name}")
        shape = tuple(r.u32(f"dim {d} of {name}") for d in range(rank))
        dtype_id = r.u8(f"dtype of {name}")
        if dtype_id >= len(DTYPES):
            raise Ct2FormatError(f"{path}: variable {name} has unknown dtype code {dtype_id}")
        nbytes = r.u32(f"byte count of {name}")
        itemsize = 2 if DTYPES[dtype_id] == "bfloat16" else np.dtype(DTYPES[dtype_id]).itemsize
        want = itemsize * int(np.prod(shape, dtype=np.int64))
        if nbytes != want:
            raise Ct2FormatError(f"{path}: variable {name} {DTYPE_NAMES[dtype_id]}{list(shape)} has {nbytes} "
                                 f"bytes, its shape needs {want}")
        if name in variables:
            raise Ct2FormatError(f"{path}: variable {name} stored twice")
        variables[name] = _to_array(r.take(nbytes, f"data of {name}"), dtype_id, shape)
    aliases: Dict[str, str] = {}
    for k in range(r.u32("alias count")):
        alias = r.string(f"alias {k}")
        target = r.string(f"target of alias {alias}")
        if target not in variables:
            raise Ct2FormatError(f"{path}: alias {alias} names {target}, which is not stored")
        aliases[alias] = target
    if r.pos != len(r.data):
        raise Ct2FormatError(f"{path}: {len(r.data) - r.pos} unexpected bytes after the aliases")
    return spec, revision, variables, aliases
