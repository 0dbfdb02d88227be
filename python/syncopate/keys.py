"""The cluster's deterministic functions in numpy, bit for bit: the mixer, seeds, initial values
and the CTR models' keys.

A Syncopate cluster derives persisted values from a few fixed functions: initial weights and
embedding rows (``libs/tensor/initializer.cc``), the keys the built-in CTR models store rows
under (``libs/model/ctr_model.cc``), all built on splitmix64 (``libs/common/splitmix64.h``).
Tools outside the cluster need the same values: a row that no checkpoint holds reads as its
initial value, and a Criteo value must become the key its row was trained under. Every function
here is a port of the C++ one with the same name, vectorised over numpy ``uint64`` arrays with
wrapping (modulo 2**64) arithmetic, and pinned to the C++ unit tests' values in
``tests/python/test_keys.py``.

Integer inputs may be Python ints (any, reduced modulo 2**64), numpy arrays of any integer dtype
(signed ones are taken as two's complement bit patterns: ``int64`` keys from torch are the
``uint64`` keys' bits) or torch tensors. Results are ``uint64`` arrays of the broadcast shape.
"""
import dataclasses
import math
from typing import Any, Mapping, Union

import numpy as np

MASK64 = (1 << 64) - 1
# Steele, Lea & Flood (2014): splitmix64's increment (the golden-ratio "gamma") and multipliers.
_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
# Their inverses modulo 2**64 (both are odd), for unsplitmix64.
_M1_INVERSE = np.uint64(pow(0xBF58476D1CE4E5B9, -1, 1 << 64))
_M2_INVERSE = np.uint64(pow(0x94D049BB133111EB, -1, 1 << 64))

CTR_NUMERIC = 13
CTR_CATEGORICAL = 26
# An empty categorical column in a Criteo file (libs/data/criteo_reader.h kMissingCategory).
# Parsed values have at most 15 hex digits, so no value in a file collides with it.
MISSING_CATEGORY = MASK64

IntLike = Union[int, np.ndarray, Any]


def as_u64(values: IntLike) -> np.ndarray:
    """``values`` as a ``uint64`` array: the bit patterns of signed integers, ints modulo 2**64.

    Why not ``np.asarray(values, dtype=np.uint64)``: numpy refuses negative Python ints and
    converts int64 arrays by value, while the cluster's keys are bit patterns (torch holds them
    as int64, a negative id is a key >= 2**63).
    """
    if hasattr(values, "numpy") and hasattr(values, "dtype") and not isinstance(
            values, np.ndarray):  # a torch tensor, without importing torch
        values = values.detach().cpu().numpy()
    if isinstance(values, (int, list, tuple)):
        # Python ints may be negative or >= 2**63: numpy would pick float64 or object for them.
        values = np.asarray(values, dtype=object)
    array = np.asarray(values)
    if array.dtype == np.uint64:
        return array
    if array.dtype.kind == "i":
        return array.astype(np.int64, copy=False).view(np.uint64)
    if array.dtype.kind == "u" or array.dtype == np.bool_:
        return array.astype(np.uint64)
    if array.dtype.kind == "O":
        flat = array.reshape(-1).tolist()
        if not all(isinstance(v, (int, np.integer)) for v in flat):
            raise TypeError("expected integers")
        flat = [int(v) & MASK64 for v in flat]
        return np.array(flat, dtype=np.uint64).reshape(array.shape)
    raise TypeError(f"expected integers, got an array of {array.dtype}")


def splitmix64(x: IntLike) -> np.ndarray:
    """``SplitMix64``: the fixed 64-bit mixer every derivation uses (splitmix64's output step)."""
    x = as_u64(x)
    # Wrapping is the definition (C++ unsigned arithmetic); numpy warns on overflow of scalars.
    with np.errstate(over="ignore"):
        x = x + _GAMMA
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


def unsplitmix64(y: IntLike) -> np.ndarray:
    """The inverse of :func:`splitmix64` (a bijection): ``unsplitmix64(splitmix64(x)) == x``.

    Why it exists: the CTR keys are ``splitmix64`` of a value mixed with its field, so a key
    gives its value back; the crosses' keys need the values (see :func:`criteo_values`).
    """
    y = as_u64(y)
    with np.errstate(over="ignore"):
        # x ^= x >> s is undone by XOR-ing in every further multiple of s below 64.
        y = y ^ (y >> np.uint64(31)) ^ (y >> np.uint64(62))
        y = y * _M2_INVERSE
        y = y ^ (y >> np.uint64(27)) ^ (y >> np.uint64(54))
        y = y * _M1_INVERSE
        y = y ^ (y >> np.uint64(30)) ^ (y >> np.uint64(60))
        return y - _GAMMA


def derive_seed(parent: IntLike, value: IntLike) -> np.ndarray:
    """``DeriveSeed``: the child seed of ``parent`` for ``value``,
    ``splitmix64(parent ^ splitmix64(value))``."""
    return splitmix64(as_u64(parent) ^ splitmix64(value))


def fnv1a64(text: Union[str, bytes]) -> int:
    """64-bit FNV-1a of a name's bytes (UTF-8 for a ``str``), as ``Fnv1a64`` in initializer.cc."""
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & MASK64
    return h


def stream_key(seed: int, name: Union[str, bytes]) -> int:
    """``StreamKey``: the counter base of a tensor's (or table's) splitmix64 sequence."""
    return int(derive_seed(int(seed) & MASK64, fnv1a64(name)))


@dataclasses.dataclass(frozen=True)
class Initializer:
    """``syncopate.v1.Initializer``: how a tensor or an embedding row starts.

    ``kind`` is ``ZEROS``, ``UNIFORM`` (U(-scale, +scale)), ``HE_UNIFORM``
    (U(-a, a), a = sqrt(6 / fan_in)) or ``GLOROT_UNIFORM`` (a = sqrt(6 / (fan_in + fan_out))).
    """
    kind: str
    scale: float = 0.0
    fan_in: int = 0
    fan_out: int = 0

    @classmethod
    def from_json(cls, spec: Mapping[str, Any]) -> "Initializer":
        """From an export manifest's ``{"kind": "UNIFORM", "scale": 0.05}``."""
        if "kind" not in spec:
            raise ValueError(f"initializer {dict(spec)} has no kind")
        return cls(kind=str(spec["kind"]), scale=float(spec.get("scale", 0.0)),
                   fan_in=int(spec.get("fan_in", 0)), fan_out=int(spec.get("fan_out", 0)))

    def to_json(self) -> dict:
        spec: dict = {"kind": self.kind}
        if self.kind == "UNIFORM":
            spec["scale"] = self.scale
        if self.kind in ("HE_UNIFORM", "GLOROT_UNIFORM"):
            spec["fan_in"] = self.fan_in
            spec["fan_out"] = self.fan_out
        return spec

    def limit(self, name: str = "") -> float:
        """``UniformLimit``: the bound of U(-limit, +limit), 0 for ZEROS; ValueError for the
        C++'s INVALID_ARGUMENT cases."""
        if self.kind == "ZEROS":
            return 0.0
        if self.kind == "HE_UNIFORM":
            _require_fan(self, "fan_in", self.fan_in, name)
            return math.sqrt(6.0 / float(self.fan_in))
        if self.kind == "GLOROT_UNIFORM":
            _require_fan(self, "fan_in", self.fan_in, name)
            _require_fan(self, "fan_out", self.fan_out, name)
            return math.sqrt(6.0 / float(self.fan_in + self.fan_out))
        if self.kind == "UNIFORM":
            if not (self.scale > 0 and math.isfinite(self.scale)):
                raise ValueError(f"initializer UNIFORM of tensor '{name}' needs a finite "
                                 f"scale > 0, got {self.scale}")
            return float(self.scale)
        raise ValueError(f"tensor '{name}' has no usable initializer kind ({self.kind!r})")


def _require_fan(init: Initializer, field: str, fan: int, name: str) -> None:
    if fan <= 0:
        raise ValueError(f"initializer {init.kind} of tensor '{name}' needs {field} > 0, got {fan}")


# 24 random bits fill a float mantissa exactly: unit is in [0, 1) with spacing 2^-24.
_TWO_TO_MINUS_24 = 1.0 / 16777216.0


def _uniform(positions: np.ndarray, limit: float) -> np.ndarray:
    """``FillUniform`` at ``positions`` (uint64 counters): float32 draws of U(-limit, +limit).

    The C++ computes ``static_cast<float>((2.0 * unit - 1.0) * limit)`` in double: 2u - 1 is
    exact (24-bit unit), the product rounds once to double, the cast once to float, and IEEE
    float64 numpy does the same two roundings.
    """
    bits = splitmix64(positions)
    unit = (bits >> np.uint64(40)).astype(np.float64) * _TWO_TO_MINUS_24
    return ((2.0 * unit - 1.0) * limit).astype(np.float32)


def initial_slice(init: Initializer, seed: int, tensor_name: str, offset: int,
                  size: int) -> np.ndarray:
    """``InitializeSlice``: elements [offset, offset + size) of the dense tensor ``tensor_name``
    initialised by ``init`` (float32 [size])."""
    if offset < 0:
        raise ValueError(f"negative offset {offset} into tensor '{tensor_name}'")
    limit = init.limit(tensor_name)
    if init.kind == "ZEROS":
        return np.zeros(size, dtype=np.float32)
    with np.errstate(over="ignore"):
        positions = np.uint64(stream_key(seed, tensor_name)) + (
            np.uint64(offset) + np.arange(size, dtype=np.uint64))
    return _uniform(positions, limit)


def initial_rows(init: Initializer, seed: int, table_name: str, keys: IntLike,
                 dim: int) -> np.ndarray:
    """``InitializeRow`` for every key: float32 [len(keys), dim], row i the initial value of
    row ``keys[i]`` of table ``table_name`` (what the cluster reads for a key without a row).

    Each row has its own stream, ``derive_seed(stream_key(seed, table), key)``, and element j of
    the row is position j of it, so a row is a pure function of (seed, table, key).
    """
    keys = as_u64(keys).reshape(-1)
    if dim < 0:
        raise ValueError(f"table '{table_name}': dim must be >= 0, got {dim}")
    limit = init.limit(table_name)
    if init.kind == "ZEROS":
        return np.zeros((len(keys), dim), dtype=np.float32)
    streams = derive_seed(stream_key(seed, table_name), keys)
    with np.errstate(over="ignore"):
        positions = streams[:, None] + np.arange(dim, dtype=np.uint64)[None, :]
    return _uniform(positions, limit)


def categorical_key(field: IntLike, value: IntLike) -> np.ndarray:
    """``CategoricalKey``: the key value ``value`` of categorical field ``field`` (0-based) is
    stored under, in every table: ``derive_seed(value, field + 1)``."""
    field = as_u64(field)
    with np.errstate(over="ignore"):
        return derive_seed(value, field + np.uint64(1))


def cross_key(cross: IntLike, a: IntLike, b: IntLike) -> np.ndarray:
    """``CrossKey``: the key of cross ``cross`` (its index in the model's crosses) of the values
    ``a`` and ``b``: ``categorical_key(26 + cross, splitmix64(a) ^ b)``, outside the fields' key
    space and order-sensitive."""
    cross = as_u64(cross)
    with np.errstate(over="ignore"):
        return categorical_key(cross + np.uint64(CTR_CATEGORICAL), splitmix64(a) ^ as_u64(b))


def criteo_keys(categorical_values: IntLike) -> np.ndarray:
    """The 26 keys of each Criteo row: uint64 [n, 26] values (as parsed, MISSING_CATEGORY for
    an empty column) to uint64 [n, 26] keys, ``categorical_key(column, value)`` -- what the
    built-in models and :class:`syncopate.torch.Criteo` use."""
    values = as_u64(categorical_values)
    if values.ndim != 2 or values.shape[1] != CTR_CATEGORICAL:
        raise ValueError(f"expected [n, {CTR_CATEGORICAL}] categorical values, got shape "
                         f"{values.shape}")
    return categorical_key(np.arange(CTR_CATEGORICAL, dtype=np.uint64)[None, :], values)


def criteo_values(keys: IntLike) -> np.ndarray:
    """The inverse of :func:`criteo_keys`: uint64 [n, 26] keys (or their int64 bits) back to
    the values they were made from (splitmix64 is a bijection, so nothing is lost)."""
    keys = as_u64(keys)
    if keys.ndim != 2 or keys.shape[1] != CTR_CATEGORICAL:
        raise ValueError(f"expected [n, {CTR_CATEGORICAL}] keys, got shape {keys.shape}")
    fields = np.arange(1, CTR_CATEGORICAL + 1, dtype=np.uint64)[None, :]
    return unsplitmix64(keys) ^ splitmix64(fields)
