"""The safetensors file layout, read and written with numpy (Debian packages no safetensors).

https://github.com/huggingface/safetensors: an 8-byte little-endian header length N, N bytes of
JSON (``{"<name>": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...}``, an
optional ``"__metadata__"`` of strings), then the tensors' little-endian bytes, offsets counted
from the end of the header. An export's ``dense.safetensors`` uses it because every framework
reads it and it cannot run code when loaded (unlike a pickle).
"""
import json
import os
import struct
from typing import Dict, Mapping, Optional

import numpy as np

_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
           "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?"}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}
# A header larger than this is not a header (the format's own reference reader refuses 100 MB).
_MAX_HEADER_BYTES = 100_000_000


def read_safetensors(path: str) -> Dict[str, np.ndarray]:
    """Every tensor of the file, by name, in the header's order (an export's flat-vector
    order). ValueError, naming the file, for anything that is not a well-formed file."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"'{path}' is not a safetensors file: {len(data)} bytes")
    (header_bytes,) = struct.unpack("<Q", data[:8])
    if header_bytes > min(len(data) - 8, _MAX_HEADER_BYTES):
        raise ValueError(f"'{path}' is not a safetensors file: a header of {header_bytes} bytes "
                         f"in {len(data)}")
    try:
        header = json.loads(data[8:8 + header_bytes].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"'{path}' has no JSON header: {e}") from None
    if not isinstance(header, dict):
        raise ValueError(f"'{path}': the header is not a JSON object")
    body = memoryview(bytearray(data[8 + header_bytes:]))  # writable: torch.from_numpy takes it
    tensors: Dict[str, np.ndarray] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = np.dtype(_DTYPES[entry["dtype"]])
            shape = [int(d) for d in entry["shape"]]
            begin, end = (int(o) for o in entry["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"'{path}': tensor {name!r} has a bad entry {entry!r}") from None
        count = int(np.prod(shape, dtype=np.int64))
        if min(shape, default=0) < 0 or not 0 <= begin <= end <= len(body) or \
                end - begin != count * dtype.itemsize:
            raise ValueError(f"'{path}': tensor {name!r} ({entry['dtype']} {shape}) has bytes "
                             f"[{begin}, {end}) of {len(body)}")
        tensors[name] = np.frombuffer(body[begin:end], dtype=dtype).reshape(shape)
    return tensors


def write_safetensors(path: str, tensors: Mapping[str, np.ndarray],
                      metadata: Optional[Mapping[str, str]] = None) -> None:
    """Writes ``tensors`` in their order, the header padded with spaces to a multiple of 8
    bytes (so every tensor starts 8-byte aligned when mapped). Written beside ``path`` and
    renamed, so a reader never sees half a file."""
    header: Dict[str, object] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    arrays = []
    offset = 0
    for name, value in tensors.items():
        array = np.asarray(value)
        little = array.dtype.newbyteorder("<") if array.dtype.itemsize > 1 else array.dtype
        if np.dtype(little) not in _NAMES:
            raise ValueError(f"tensor {name!r}: safetensors has no dtype for {array.dtype}")
        array = np.require(array, dtype=little, requirements="C")  # keeps a 0-d shape
        header[name] = {"dtype": _NAMES[np.dtype(little)], "shape": list(array.shape),
                        "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
        arrays.append(array)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for array in arrays:
            f.write(array.tobytes())
    os.replace(temporary, path)
