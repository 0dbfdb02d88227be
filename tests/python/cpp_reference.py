"""The C++ built-in models' forward, transcribed literally for the tests: one flat float vector
laid out as libs/model/dense_layout.cc and the models' constructors lay it out (each tensor
[rows x cols] column-major), one example at a time, in float64.

Independent of syncopate.models on purpose: it reads the flat vector the way Eigen maps it, so a
test comparing the two checks the export's layout rule (a [rows x cols] tensor is stored as
[cols, rows] row-major) and the parameter mapping as well as the math.
"""
import math
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np

from syncopate import keys

Spec = Tuple[str, int, int]  # name, rows, cols


def mlp_tensors(input_dim: int, hidden: Sequence[int], classes: int) -> List[Spec]:
    """Mlp::Mlp: "dense<i>/w" [outputs x inputs], "dense<i>/b" [outputs x 1]."""
    specs, inputs = [], input_dim
    for i, outputs in enumerate([*hidden, classes]):
        specs += [(f"dense{i}/w", outputs, inputs), (f"dense{i}/b", outputs, 1)]
        inputs = outputs
    return specs


def ctr_tensors(kind: str, e: int, hidden: Sequence[int], cross_layers: int,
                indicators: bool, fm_numeric: bool = False,
                cross_numeric: bool = False) -> List[Spec]:
    """CtrModel::CtrModel's tensors() in flat-vector order."""
    u = 26 if indicators else 13
    d = 26 * e + u
    c = d if cross_numeric else 26 * e
    specs, inputs = [], d
    widths = [*hidden, 1]
    for i, outputs in enumerate(widths):
        name = "deep_out" if i + 1 == len(widths) else f"deep{i}"
        specs += [(f"{name}/w", outputs, inputs), (f"{name}/b", outputs, 1)]
        inputs = outputs
    specs.append(("wide/numeric", 1, u))
    if fm_numeric:
        specs.append(("fm/numeric", e, u))
    for l in range(cross_layers):
        specs += [(f"cross{l}/w", c, c), (f"cross{l}/b", c, 1)]
    return specs


class Flat:
    """A flat parameter vector and its tensors, mapped as Eigen maps them (column-major)."""

    def __init__(self, specs: List[Spec], values: np.ndarray) -> None:
        self.specs = specs
        self.values = np.asarray(values, dtype=np.float32)
        self.offsets: Dict[str, Tuple[int, int, int]] = {}
        offset = 0
        for name, rows, cols in specs:
            self.offsets[name] = (offset, rows, cols)
            offset += rows * cols
        assert offset == len(self.values), (offset, len(self.values))

    @classmethod
    def random(cls, specs: List[Spec], seed: int, scale: float = 0.3) -> "Flat":
        size = sum(r * c for _, r, c in specs)
        return cls(specs, np.random.default_rng(seed).uniform(-scale, scale, size))

    def matrix(self, name: str) -> np.ndarray:
        """[rows x cols] in float64: element (r, c) is values[offset + r + c * rows]."""
        offset, rows, cols = self.offsets[name]
        block = self.values[offset:offset + rows * cols].astype(np.float64)
        return np.array([[block[r + c * rows] for c in range(cols)] for r in range(rows)])

    def export(self) -> Dict[str, np.ndarray]:
        """What the export's dense.safetensors holds: each tensor's bytes read row-major as
        [cols, rows] (docs/export-format.md)."""
        out = {}
        for name, (offset, rows, cols) in self.offsets.items():
            out[name] = self.values[offset:offset + rows * cols].reshape(cols, rows).copy()
        return out


def mlp_probabilities(flat: Flat, features: np.ndarray, layers: int) -> np.ndarray:
    out = []
    for x in np.asarray(features, dtype=np.float64):
        h = x
        for i in range(layers):
            h = flat.matrix(f"dense{i}/w") @ h + flat.matrix(f"dense{i}/b")[:, 0]
            if i + 1 < layers:
                h = np.maximum(h, 0.0)
        z = np.exp(h - h.max())
        out.append(z / z.sum())
    return np.array(out)


def ctr_logits(kind: str, e: int, hidden: Sequence[int], crosses: Sequence[Tuple[int, int]],
               cross_layers: int, indicators: bool, flat: Flat, numeric: np.ndarray,
               values: np.ndarray, deep_row: Callable[[int], np.ndarray],
               wide_row: Callable[[int], float]) -> np.ndarray:
    """CtrModel::Forward for raw numerics (NaN = missing) and raw categorical values (uint64
    [n, 26]); deep_row / wide_row give a key's row as the shards would."""
    logits = []
    for j in range(len(numeric)):
        field_keys = [int(keys.categorical_key(f, values[j, f])) for f in range(26)]
        x = [0.0 if math.isnan(v) else math.log1p(max(float(v), 0.0)) for v in numeric[j]]
        if indicators:
            x += [1.0 if math.isnan(v) else 0.0 for v in numeric[j]]
        x = np.array(x)
        rows = [np.asarray(deep_row(k), dtype=np.float64) for k in field_keys]
        x0 = np.concatenate(rows + [x])
        h = x0
        # The cross layers' width says what they cross: x0 (cross_numeric), or the embeddings,
        # the numerics then joining the MLP's input below the last layer's output.
        c = flat.offsets["cross0/b"][1] if cross_layers else len(x0)
        for l in range(cross_layers):
            z = flat.matrix(f"cross{l}/w") @ h[:c] + flat.matrix(f"cross{l}/b")[:, 0]
            h = np.concatenate([x0[:c] * z + h[:c], x0[c:]])
        for i in range(len(hidden)):
            h = np.maximum(flat.matrix(f"deep{i}/w") @ h + flat.matrix(f"deep{i}/b")[:, 0], 0.0)
        deep = (flat.matrix("deep_out/w") @ h + flat.matrix("deep_out/b")[:, 0])[0]
        wide = float(flat.matrix("wide/numeric")[0] @ x)
        wide += sum(float(wide_row(k)) for k in field_keys)
        for c, (a, b) in enumerate(crosses):
            wide += float(wide_row(int(keys.cross_key(c, values[j, a], values[j, b]))))
        logit = deep + wide
        if kind == "DEEPFM":
            u = list(rows)
            if "fm/numeric" in flat.offsets:
                vectors = flat.matrix("fm/numeric")  # e x u: column i is numeric field i's vector
                u += [x[i] * vectors[:, i] for i in range(len(x))]
            total = np.sum(u, axis=0)
            logit += 0.5 * (total @ total - sum(v @ v for v in u))
        logits.append(logit)
    return np.array(logits)
