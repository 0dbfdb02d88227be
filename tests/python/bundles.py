"""Export bundles written for the tests as docs/export-format.md lays them out (the C++
`syncopate export` writes the real ones): manifest.json, job.textproto, dense.safetensors and
tables/<t>/keys-NNNNN.npy + rows-NNNNN.npy, keys sorted as uint64 and cut into chunks."""
import json
import os
from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np

from syncopate.safetensors import write_safetensors

Table = Tuple[np.ndarray, np.ndarray, dict, str]  # keys (any order), rows, initializer, absent


def write_bundle(directory: str, model: dict, dense: Mapping[str, np.ndarray],
                 tables: Mapping[str, Table], *, seed: int = 1, model_kind: Optional[str] = None,
                 roles: Optional[Mapping[str, str]] = None, chunk_rows: int = 3,
                 dataset: Optional[dict] = None) -> str:
    """Writes a bundle; `tables` maps a name to (keys, rows, initializer, absent_rows)."""
    os.makedirs(directory, exist_ok=True)
    roles = roles or {}
    dense_entries = []
    for name, value in dense.items():
        entry = {"name": name, "shape": list(np.shape(value)),
                 "role": roles.get(name, "parameter")}
        if entry["role"] == "buffer":
            entry["dtype"] = "float32"
        dense_entries.append(entry)
    write_safetensors(os.path.join(directory, "dense.safetensors"),
                      {name: np.asarray(value, dtype=np.float32) for name, value in dense.items()})
    table_entries: List[dict] = []
    for name, (keys, rows, initializer, absent) in tables.items():
        keys = np.asarray(keys).astype(np.int64, copy=False).view(np.uint64) \
            if np.asarray(keys).dtype.kind == "i" else np.asarray(keys, dtype=np.uint64)
        order = np.argsort(keys, kind="stable")  # ascending as uint64
        keys, rows = keys[order], np.asarray(rows, dtype=np.float32)[order]
        chunks = []
        os.makedirs(os.path.join(directory, "tables", name), exist_ok=True)
        for c, begin in enumerate(range(0, max(len(keys), 1), chunk_rows)):
            k = f"tables/{name}/keys-{c:05d}.npy"
            r = f"tables/{name}/rows-{c:05d}.npy"
            np.save(os.path.join(directory, k), keys[begin:begin + chunk_rows])
            np.save(os.path.join(directory, r), rows[begin:begin + chunk_rows])
            chunks.append({"keys": k, "rows": r, "count": len(keys[begin:begin + chunk_rows])})
        table_entries.append({"name": name, "dim": int(rows.shape[1]), "count": len(keys),
                              "initializer": initializer, "absent_rows": absent,
                              "chunks": chunks})
    manifest = {
        "format": "syncopate-export/1",
        "job_id": "test-job",
        "model_kind": model_kind or model["kind"],
        "seed": seed,
        "versions": [12],
        "source": "latest",
        "model": model,
        "dataset": dataset or {"kind": "KIND_UNSPECIFIED"},
        "dense": dense_entries,
        "tables": table_entries,
    }
    with open(os.path.join(directory, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
    with open(os.path.join(directory, "job.textproto"), "w") as f:
        f.write(f'job_id: "test-job"\nseed: {seed}\n')
    return directory


def ctr_tables(deep: Dict[int, np.ndarray], wide: Dict[int, float],
               deep_absent: str = "initial") -> Dict[str, Table]:
    """The CTR models' two tables from {key: row} dicts (keys as uint64 ints)."""
    dim = len(next(iter(deep.values()))) if deep else 1
    deep_keys = np.array(list(deep), dtype=np.uint64)
    deep_rows = np.array(list(deep.values()), dtype=np.float32).reshape(len(deep), dim)
    wide_keys = np.array(list(wide), dtype=np.uint64)
    wide_rows = np.array(list(wide.values()), dtype=np.float32).reshape(len(wide), 1)
    return {"deep": (deep_keys, deep_rows, {"kind": "UNIFORM", "scale": 0.05}, deep_absent),
            "wide": (wide_keys, wide_rows, {"kind": "ZEROS"}, "initial")}
