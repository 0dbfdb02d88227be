"""Syncopate's dataset files read with numpy alone: the same examples as the C++ readers.

Inside Syncopate's processes :mod:`syncopate.torch.data` reads files through the C++ readers
(``libs/data``); everywhere else (a notebook scoring an exported model, a test) it falls back to
these, which follow the same rules, line for line:

* IDX (``libs/data/idx_reader.cc``): big-endian header, u8 pixels scaled by ``v / 255.0f``
  (float32 division), gzip or plain;
* Criteo TSV (``libs/data/criteo_reader.cc``, ``criteo_files.cc``, ``text_stream.cc``): 40
  tab-separated fields, label ``0``/``1``, integers ``-?[0-9]{1,19}`` in int64's range converted
  to float32 as C++'s ``static_cast<float>(int64_t)`` (round to nearest), empty = NaN; 1 to 15
  hex digits, empty = :data:`syncopate.keys.MISSING_CATEGORY`; a ``\\r`` before ``\\n``
  tolerated; a last line without ``\\n`` is a row; paths are comma-separated lists of files or
  globs (each glob's matches sorted, directories skipped), plain or gzip (concatenated members
  read as one stream; bytes after the last member that do not start another are ignored, as
  gzread does); ``limit`` keeps the first rows over all files.

Errors are exceptions with the C++ reader's message: FileNotFoundError for a missing file,
ValueError for bad data (``Criteo file 'x': line 17: field C3: bad hex 'zz'``).
"""
import dataclasses
import glob
import math
import os
import re
import zlib
from typing import List, Optional, Tuple

import numpy as np

from syncopate.keys import CTR_CATEGORICAL, CTR_NUMERIC, MISSING_CATEGORY

_GZIP_MAGIC = b"\x1f\x8b"
_IMAGES_MAGIC = 0x00000803  # u8 (0x08), 3 dimensions
_LABELS_MAGIC = 0x00000801  # u8 (0x08), 1 dimension
_INSTALL_HINT = ("; Fashion-MNIST comes from Debian's package: apt-get install "
                 "dataset-fashion-mnist (files land in /usr/share/datasets/fashion-mnist)")
_CRITEO_FIELDS = 1 + CTR_NUMERIC + CTR_CATEGORICAL
_MAX_LINE_BYTES = 65536
_INT64_MAX = (1 << 63) - 1


def read_bytes(path: str, what: str) -> bytes:
    """The whole uncompressed content of a plain or gzip file (told apart by the magic bytes,
    as zlib's gzread and TextStream do)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"cannot open {what} '{path}': No such file or directory") from None
    except IsADirectoryError:
        raise IsADirectoryError(f"cannot open {what} '{path}': Is a directory") from None
    if data[:2] != _GZIP_MAGIC:
        return data
    parts = []
    rest = data
    while rest[:2] == _GZIP_MAGIC:
        inflater = zlib.decompressobj(wbits=31)  # a gzip wrapper, header and trailer checked
        try:
            parts.append(inflater.decompress(rest))
        except zlib.error as e:
            raise ValueError(f"{what} '{path}' is corrupt: {e}") from None
        if not inflater.eof:
            raise ValueError(f"{what} '{path}' is truncated: the gzip stream ends early")
        rest = inflater.unused_data
    return b"".join(parts)


# --- IDX ------------------------------------------------------------------------------------

def _idx_header(data: bytes, path: str, magic: int, dims: int, kind: str) -> List[int]:
    if len(data) < 4:
        raise ValueError(f"IDX file '{path}' is truncated: the magic number at byte offset 0 "
                         f"should be 4 bytes, but only {len(data)} could be read")
    found = int.from_bytes(data[:4], "big")
    if found != magic:
        raise ValueError(f"IDX file '{path}' has magic number 0x{found:08x}, expected "
                         f"0x{magic:08x} ({kind})")
    if len(data) < 4 + 4 * dims:
        raise ValueError(f"IDX file '{path}' is truncated: the dimension sizes at byte offset 4 "
                         f"should be {4 * dims} bytes, but only {len(data) - 4} could be read")
    return [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]


def load_idx_pair(images_path: str, labels_path: str,
                  limit: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """``ReadIdxPair``: (features float32 [n, rows * cols] in [0, 1], labels int64 [n])."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0 (0 = all examples), got {limit}")
    labels_data = read_bytes(labels_path, "IDX file")
    (count_labels,) = _idx_header(labels_data, labels_path, _LABELS_MAGIC, 1, "IDX u8 1-D labels")
    images_data = read_bytes(images_path, "IDX file")
    count, rows, cols = _idx_header(images_data, images_path, _IMAGES_MAGIC, 3,
                                    "IDX u8 3-D images")
    if rows == 0 or cols == 0 or rows > (2**31 - 1) // cols:
        raise ValueError(f"IDX file '{images_path}' has image size {rows} x {cols}; expected each "
                         f"side > 0 and at most {2**31 - 1} pixels")
    if count_labels != count:
        raise ValueError(f"IDX files disagree: '{images_path}' holds {count} images but "
                         f"'{labels_path}' holds {count_labels} labels")
    if len(labels_data) - 8 < count:
        raise ValueError(f"IDX file '{labels_path}' is truncated: the labels at byte offset 8 "
                         f"should be {count} bytes, but only {len(labels_data) - 8} could be read")
    size = min(limit, count) if limit > 0 else count
    dim = rows * cols
    pixels = size * dim
    if len(images_data) - 16 < pixels:
        raise ValueError(f"IDX file '{images_path}' is truncated: the pixels at byte offset 16 "
                         f"should be {pixels} bytes, but only {len(images_data) - 16} could be "
                         "read")
    # static_cast<float>(v) / 255.0f: a float32 division, correctly rounded in both languages.
    scale = np.arange(256, dtype=np.float32) / np.float32(255.0)
    raw = np.frombuffer(images_data, dtype=np.uint8, count=pixels, offset=16)
    features = scale[raw].reshape(size, dim)
    labels = np.frombuffer(labels_data, dtype=np.uint8, count=size, offset=8).astype(np.int64)
    return features, labels


def load_fashion_mnist(directory: str, split: str,
                       limit: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """``LoadFashionMnist``: a split (``train`` or ``test``) of Debian's dataset-fashion-mnist
    layout, ``{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz``."""
    if split not in ("train", "test"):
        raise ValueError("split: train|test")
    prefix = "train" if split == "train" else "t10k"
    try:
        return load_idx_pair(os.path.join(directory, f"{prefix}-images-idx3-ubyte.gz"),
                             os.path.join(directory, f"{prefix}-labels-idx1-ubyte.gz"), limit)
    except FileNotFoundError as e:
        raise FileNotFoundError(str(e) + _INSTALL_HINT) from None


# --- Criteo ---------------------------------------------------------------------------------

@dataclasses.dataclass
class CriteoRows:
    """Criteo examples in memory (``data::CtrDataset``), one per row."""
    numeric: np.ndarray  # float32 [n, 13], NaN = missing
    values: np.ndarray  # uint64 [n, 26], the hex values, MISSING_CATEGORY = empty
    labels: np.ndarray  # float32 [n], 0 or 1

    def __len__(self) -> int:
        return len(self.labels)


def expand_data_paths(spec: str) -> List[str]:
    """``ExpandDataPaths``: the files a dataset path names, in order (comma-separated paths or
    glob patterns; each pattern's matches sorted by name, directories skipped)."""
    if not spec.strip():
        raise ValueError("the dataset path is empty")
    paths: List[str] = []
    for element in spec.split(","):
        pattern = element.strip()
        if not pattern:
            raise ValueError(f"empty element in dataset path '{spec}'")
        if not any(c in pattern for c in "*?["):
            paths.append(pattern)  # a plain path: opening it reports a missing file
            continue
        found = sorted((m for m in glob.glob(pattern) if not os.path.isdir(m)),
                       key=lambda p: p.encode("utf-8", "surrogateescape"))
        if not found:
            raise FileNotFoundError(f"no file matches '{pattern}'")
        paths.extend(found)
    return paths


# A valid line without its '\n' and optional '\r': the fast path; any other line is checked
# field by field for the C++ parser's message.
_VALID_LINE = re.compile(rb"[01](?:\t(?:-?[0-9]{1,19})?){13}(?:\t[0-9a-fA-F]{0,15}){26}")


def _shown(value: bytes) -> str:
    """A field for an error message as absl::CHexEscape shows it, cut at 40 bytes."""
    out = []
    for b in value[:40]:
        c = chr(b)
        if c in "\n\r\t\"'\\":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\"": "\\\"", "'": "\\'",
                        "\\": "\\\\"}[c])
        elif 0x20 <= b < 0x7F:
            out.append(c)
        else:
            out.append(f"\\x{b:02x}")
    return "'" + "".join(out) + ("...'" if len(value) > 40 else "'")


def _field_name(field: int) -> str:
    if field == 0:
        return "label"
    if field <= CTR_NUMERIC:
        return f"I{field}"
    return f"C{field - CTR_NUMERIC}"


def _line_error(line: bytes) -> str:
    """What ParseLine says about a line the fast path refused (or a numeric out of range)."""
    if len(line) > _MAX_LINE_BYTES:
        return f"longer than {_MAX_LINE_BYTES} bytes"
    if line.endswith(b"\r"):
        line = line[:-1]
    fields = line.split(b"\t")
    if len(fields) != _CRITEO_FIELDS:
        return f"expected {_CRITEO_FIELDS} tab-separated fields, found {len(fields)}"
    for i, value in enumerate(fields):
        if i == 0:
            if value not in (b"0", b"1"):
                return f"field label: expected 0 or 1, got {_shown(value)}"
        elif i <= CTR_NUMERIC:
            if value and _parse_integer(value) is None:
                return f"field {_field_name(i)}: bad integer {_shown(value)}"
        elif value and not re.fullmatch(rb"[0-9a-fA-F]{1,15}", value):
            return f"field {_field_name(i)}: bad hex {_shown(value)}"
    return "unparsable line"  # not reached: the fast path accepts every other line


def _parse_integer(text: bytes) -> Optional[int]:
    """``ParseInteger``: decimal with an optional '-', at most 19 digits, in int64's range."""
    if not re.fullmatch(rb"-?[0-9]{1,19}", text):
        return None
    value = int(text)
    if value > _INT64_MAX or value < -_INT64_MAX - 1:
        return None
    return value


def parse_criteo(text: bytes, limit: int = 0, first_line: int = 1,
                 path: Optional[str] = None) -> CriteoRows:
    """``ParseCriteoTsv``: the rows of Criteo TSV text (at most ``limit`` if > 0)."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0 (0 = all examples), got {limit}")
    lines = text.split(b"\n")
    if lines[-1] == b"":  # the text ends with '\n' (or is empty): no partial last line
        lines.pop()
    if limit > 0:
        lines = lines[:limit]
    n = len(lines)
    labels = np.empty(n, dtype=np.float32)
    integers = np.zeros((n, CTR_NUMERIC), dtype=np.int64)
    missing = np.zeros((n, CTR_NUMERIC), dtype=bool)
    values = np.empty((n, CTR_CATEGORICAL), dtype=np.uint64)
    where = f"Criteo file '{path}': " if path is not None else ""
    for row, line in enumerate(lines):
        body = line[:-1] if line.endswith(b"\r") else line
        if len(line) > _MAX_LINE_BYTES or not _VALID_LINE.fullmatch(body):
            raise ValueError(f"{where}line {first_line + row}: {_line_error(line)}")
        fields = body.split(b"\t")
        labels[row] = 1.0 if fields[0] == b"1" else 0.0
        for i in range(CTR_NUMERIC):
            value = fields[1 + i]
            if not value:
                missing[row, i] = True
                continue
            integer = int(value)
            if integer > _INT64_MAX or integer < -_INT64_MAX - 1:
                raise ValueError(f"{where}line {first_line + row}: field {_field_name(1 + i)}: "
                                 f"bad integer {_shown(value)}")
            integers[row, i] = integer
        values[row] = [int(v, 16) if v else MISSING_CATEGORY
                       for v in fields[1 + CTR_NUMERIC:]]
    # static_cast<float>(int64_t): one rounding to nearest, as numpy's int64 -> float32 cast.
    numeric = integers.astype(np.float32)
    numeric[missing] = math.nan
    return CriteoRows(numeric=numeric, values=values, labels=labels)


def read_criteo(spec: str, limit: int = 0) -> CriteoRows:
    """Every row (the first ``limit`` if > 0) of the Criteo files ``spec`` names
    (:func:`expand_data_paths`), in memory: ``CriteoFiles`` read from first to last row."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    parts: List[CriteoRows] = []
    remaining = limit
    for path in expand_data_paths(spec):
        if limit > 0 and remaining == 0:
            break
        rows = parse_criteo(read_bytes(path, "Criteo file"), remaining, 1, path)
        parts.append(rows)
        remaining = max(remaining - len(rows), 0)
    if not parts:
        return CriteoRows(np.zeros((0, CTR_NUMERIC), np.float32),
                          np.zeros((0, CTR_CATEGORICAL), np.uint64), np.zeros(0, np.float32))
    return CriteoRows(numeric=np.concatenate([p.numeric for p in parts]),
                      values=np.concatenate([p.values for p in parts]),
                      labels=np.concatenate([p.labels for p in parts]))
