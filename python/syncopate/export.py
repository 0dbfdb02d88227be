"""From an export bundle (``syncopate export``) to files users load: a state dict and ONNX.

A bundle (docs/export-format.md) holds a trained job's dense tensors (``dense.safetensors``),
its embedding tables in sorted chunks (``tables/<t>/keys-NNNNN.npy`` + ``rows-NNNNN.npy``) and a
manifest that says how to build the model again. This module reads it (:func:`read_bundle`),
rebuilds the model with every table in local mode (:func:`load_model`) and writes what PyTorch
users load with plain PyTorch:

    model = my_model_file.model()           # or syncopate.models.from_manifest(...)
    model.load_state_dict(torch.load("model.pt"), strict=True)

:func:`write_state_dict` (every job), :func:`write_onnx` (built-in models: the MLP whole, the CTR
models' dense head) and :func:`predict` (probabilities for a batch, for comparisons with the
cluster). ``python3 -m syncopate.export BUNDLE --state-dict OUT.pt [--module PATH]
[--onnx OUT.onnx]`` is what the C++ ``syncopate export`` command runs.

Reading a bundle needs numpy alone; building models imports torch (and ONNX export onnx) when
it is asked for.
"""
import argparse
import dataclasses
import json
import os
import sys
import warnings
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from syncopate.keys import Initializer
from syncopate.safetensors import read_safetensors

FORMAT = "syncopate-export/1"
BUILTIN_KINDS = ("MLP", "WDL", "DEEPFM", "DCN")
_HIGH_BIT = np.uint64(1 << 63)


@dataclasses.dataclass(frozen=True)
class TableChunk:
    """One chunk of a table: ``count`` keys (uint64, ascending) and their rows, mapped lazily."""
    keys_path: str
    rows_path: str
    count: int

    def keys(self) -> np.ndarray:
        return np.load(self.keys_path, mmap_mode="r")

    def rows(self) -> np.ndarray:
        return np.load(self.rows_path, mmap_mode="r")


@dataclasses.dataclass(frozen=True)
class BundleTable:
    """A table of the bundle: its manifest entry, its chunks in key order."""
    name: str
    dim: int
    count: int
    initializer: Initializer
    absent_rows: str
    chunks: Tuple[TableChunk, ...]

    def load(self) -> Tuple[np.ndarray, np.ndarray]:
        """The whole table in memory, in local mode's order: (int64 keys ascending as int64,
        float32 rows [count, dim]). The export sorts keys as uint64; as int64 the keys >= 2**63
        are negative and come first, so the order is the two halves swapped, not a sort. Each
        chunk is copied once, from its mapping straight to its place."""
        chunks = []
        for chunk in self.chunks:
            keys, rows = self._checked(chunk)
            if len(keys) and chunks and keys[0] <= chunks[-1][0][-1]:
                raise ValueError(f"table '{self.name}' chunk {os.path.basename(chunk.keys_path)}: "
                                 "keys are not unique and ascending")
            if len(keys):
                chunks.append((keys, rows))
        total = sum(len(keys) for keys, _ in chunks)
        if total != self.count:
            raise ValueError(f"table '{self.name}': the chunks hold {total} rows, the manifest "
                             f"says {self.count}")
        splits = [int(np.searchsorted(keys, _HIGH_BIT)) for keys, _ in chunks]
        high = total - sum(splits)  # keys >= 2**63: a suffix in uint64 order, first as int64
        out_keys = np.empty(total, dtype=np.uint64)
        out_rows = np.empty((total, self.dim), dtype=np.float32)
        low_at, high_at = high, 0
        for (keys, rows), split in zip(chunks, splits):
            out_keys[low_at:low_at + split] = keys[:split]
            out_rows[low_at:low_at + split] = rows[:split]
            low_at += split
            out_keys[high_at:high_at + len(keys) - split] = keys[split:]
            out_rows[high_at:high_at + len(keys) - split] = rows[split:]
            high_at += len(keys) - split
        return out_keys.view(np.int64), out_rows

    def _checked(self, chunk: TableChunk) -> Tuple[np.ndarray, np.ndarray]:
        keys, rows = chunk.keys(), chunk.rows()
        where = f"table '{self.name}' chunk {os.path.basename(chunk.keys_path)}"
        if keys.dtype != np.uint64 or keys.ndim != 1 or len(keys) != chunk.count:
            raise ValueError(f"{where}: keys must be uint64 [{chunk.count}], got {keys.dtype} "
                             f"{list(keys.shape)}")
        if rows.dtype != np.float32 or rows.shape != (chunk.count, self.dim):
            raise ValueError(f"{where}: rows must be float32 [{chunk.count}, {self.dim}], got "
                             f"{rows.dtype} {list(rows.shape)}")
        if not bool(np.all(keys[1:] > keys[:-1])):
            raise ValueError(f"{where}: keys are not unique and ascending")
        return keys, rows


@dataclasses.dataclass
class Bundle:
    """An export bundle: its manifest, dense tensors (by name, flat-vector order) and tables."""
    directory: str
    manifest: Dict[str, Any]
    dense: Dict[str, np.ndarray]
    tables: Dict[str, BundleTable]

    @property
    def seed(self) -> int:
        return int(self.manifest.get("seed", 0))

    @property
    def model_kind(self) -> str:
        return str(self.manifest.get("model_kind", self.manifest.get("model", {}).get("kind")))

    def dense_roles(self) -> Dict[str, str]:
        return {d["name"]: d.get("role", "parameter") for d in self.manifest.get("dense", [])}


def read_bundle(directory: str) -> Bundle:
    """The bundle in ``directory``: manifest and dense tensors read, table chunks mapped only
    when loaded. ValueError for a bundle that breaks the format (one line naming the part)."""
    path = os.path.join(directory, "manifest.json")
    try:
        with open(path) as f:
            manifest = json.load(f)
    except FileNotFoundError:
        raise FileNotFoundError(f"'{directory}' is not an export bundle: no manifest.json") \
            from None
    except json.JSONDecodeError as e:
        raise ValueError(f"'{path}' is not JSON: {e}") from None
    if manifest.get("format") != FORMAT:
        raise ValueError(f"'{path}' has format {manifest.get('format')!r}; this reader knows "
                         f"{FORMAT!r}")
    dense = read_safetensors(os.path.join(directory, "dense.safetensors"))
    listed = manifest.get("dense", [])
    names = [d["name"] for d in listed]
    if names != list(dense):
        missing = [n for n in names if n not in dense] or [n for n in dense if n not in names]
        raise ValueError(f"manifest.json and dense.safetensors disagree on dense tensors "
                         f"(first difference: {missing[0] if missing else 'their order'!r})")
    for entry in listed:
        # 64-bit integers are JSON strings in the proto3 mapping the C++ side writes.
        if list(dense[entry["name"]].shape) != [int(d) for d in entry["shape"]]:
            raise ValueError(f"dense tensor {entry['name']!r} has shape "
                             f"{list(dense[entry['name']].shape)}; the manifest says "
                             f"{entry['shape']}")
    tables: Dict[str, BundleTable] = {}
    for entry in manifest.get("tables", []):
        chunks = tuple(TableChunk(os.path.join(directory, c["keys"]),
                                  os.path.join(directory, c["rows"]), int(c["count"]))
                       for c in entry.get("chunks", []))
        tables[entry["name"]] = BundleTable(
            name=entry["name"], dim=int(entry["dim"]), count=int(entry["count"]),
            initializer=Initializer.from_json(entry.get("initializer", {"kind": "ZEROS"})),
            absent_rows=entry.get("absent_rows", "initial"), chunks=chunks)
    return Bundle(os.path.abspath(directory), manifest, dense, tables)


# --- the model, rebuilt ---------------------------------------------------------------------

def load_model(bundle: Union[Bundle, str], module_path: Optional[str] = None, *,
               tables: bool = True):
    """The bundle's model with its trained values, every ShardedEmbedding in local mode (unless
    ``tables`` is false: the dense part alone, as the ONNX graphs need), in eval mode. TORCH
    jobs: the job's module file (``module_path``, default the manifest's ``model.module``)
    builds it, after ``torch.manual_seed(seed)`` as every worker does; built-in jobs:
    :func:`syncopate.models.from_manifest`."""
    from syncopate import models

    if isinstance(bundle, str):
        bundle = read_bundle(bundle)
    kind = bundle.model_kind
    if kind == "TORCH":
        model = _build_user_model(bundle, module_path)
        _load_user_dense(model, bundle)
    elif kind in BUILTIN_KINDS:
        model = models.from_manifest(bundle.manifest["model"])
        model.load_cluster_dense(bundle.dense)
    else:
        raise ValueError(f"model_kind {kind!r} is neither TORCH nor a built-in model "
                         f"({', '.join(BUILTIN_KINDS)})")
    if tables:
        _load_tables(model, bundle)
    return model.eval()


def _build_user_model(bundle: Bundle, module_path: Optional[str]):
    import torch

    from syncopate.torch._host import load_user_module

    path = module_path or bundle.manifest.get("model", {}).get("module")
    if not path:
        raise ValueError("the manifest names no model.module: pass the job's module file")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"module file {path!r} (the job's model.torch.module) is not a "
                                "file here: pass it explicitly (--module PATH)")
    user = load_user_module(path)
    torch.manual_seed(bundle.seed)
    model = user.model()
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{path}: model() returned {type(model).__name__}, not a torch.nn.Module")
    return model


def _load_user_dense(model, bundle: Bundle) -> None:
    """Every parameter and persistent buffer of the user's module from ``dense``, by name."""
    roles = bundle.dense_roles()
    has_buffers = any(role == "buffer" for role in roles.values())
    parameters = dict(model.named_parameters())
    persistent = set(model.state_dict(keep_vars=True))
    buffers = dict(model.named_buffers())
    used = set()
    for name, parameter in parameters.items():
        if name not in bundle.dense:
            raise ValueError(f"the export has no dense tensor for parameter {name!r} of the "
                             "module (was it trained from another module file?)")
        _copy_into(parameter, bundle.dense[name], name)
        used.add(name)
    kept = []
    for name, buffer in buffers.items():
        if name in bundle.dense:
            _copy_into(buffer, bundle.dense[name], name)
            used.add(name)
        elif name not in persistent:
            continue  # not part of the state dict: the module derives it
        elif has_buffers:
            raise ValueError(f"the export has no dense tensor for buffer {name!r} of the module")
        else:
            kept.append(name)
    if kept:
        warnings.warn(f"the export holds no buffers (made before the cluster shared them): "
                      f"{', '.join(kept)} keep the values model() gave them", stacklevel=3)
    extra = [name for name in bundle.dense if name not in used]
    if extra:
        raise ValueError(f"the module has no parameter or buffer {extra[0]!r} that the export "
                         "holds (was it trained from another module file?)")


def _copy_into(tensor, value: np.ndarray, name: str) -> None:
    import torch

    if tuple(value.shape) != tuple(tensor.shape):
        raise ValueError(f"dense tensor {name!r} has shape {list(value.shape)}; the module's is "
                         f"{list(tensor.shape)}")
    with torch.no_grad():
        # Buffers keep their own dtype (e.g. BatchNorm's int64 count); the export holds float32.
        tensor.copy_(torch.from_numpy(np.asarray(value)).to(tensor.dtype))


def _load_tables(model, bundle: Bundle) -> None:
    """Every ShardedEmbedding into local mode; modules of one table share one LocalTable."""
    import torch

    from syncopate.torch.embedding import LocalTable, ShardedEmbedding

    local: Dict[str, LocalTable] = {}
    for module in model.modules():
        if not isinstance(module, ShardedEmbedding):
            continue
        if module.table not in local:
            table = bundle.tables.get(module.table)
            if table is None:
                raise ValueError(f"the export has no table '{module.table}' (it has "
                                 f"{', '.join(bundle.tables) or 'none'})")
            if table.dim != module.dim:
                raise ValueError(f"table '{module.table}' has dim {table.dim} in the export, "
                                 f"{module.dim} in the module")
            keys, rows = table.load()
            local[module.table] = LocalTable(
                name=table.name, keys=torch.from_numpy(keys), rows=torch.from_numpy(rows),
                init=table.initializer, seed=bundle.seed, absent_rows=table.absent_rows)
        module.use_local_table(local[module.table])


def check_exportable(module_path: str, seed: int) -> None:
    """Raises, naming the problem, when a job's module could not be exported: the model() a worker
    builds, its ShardedEmbeddings in local mode over empty tables, gives a state dict that
    ``torch.save`` writes and a second fresh model() takes with ``load_state_dict(strict=True)``.
    The coordinator runs it at start for a job that exports as it runs, so a module that cannot
    export fails the job then, not hours later (TorchEasyRec's trial export)."""
    import io

    import torch

    from syncopate.keys import Initializer
    from syncopate.torch._host import load_user_module
    from syncopate.torch.embedding import LocalTable, ShardedEmbedding

    user = load_user_module(module_path)

    def build():
        torch.manual_seed(seed)
        return user.model()

    model = build()
    tables: Dict[str, LocalTable] = {}
    for module in model.modules():
        if isinstance(module, ShardedEmbedding) and module.table not in tables:
            init = (Initializer("UNIFORM", scale=module.init_scale) if module.init_scale > 0
                    else Initializer("ZEROS"))
            tables[module.table] = LocalTable(
                name=module.table, keys=torch.zeros(0, dtype=torch.int64),
                rows=torch.zeros(0, module.dim), init=init, seed=seed)
        if isinstance(module, ShardedEmbedding):
            module.use_local_table(tables[module.table])
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    build().load_state_dict(torch.load(buffer), strict=True)


# --- the outputs ----------------------------------------------------------------------------

def write_state_dict(bundle_dir: str, out_path: str, module_path: Optional[str] = None) -> None:
    """``torch.save(model.state_dict(), out_path)`` of :func:`load_model`'s model: what a fresh
    ``model()`` takes with ``load_state_dict(torch.load(out_path), strict=True)``. Parameters
    shared between two names come out under both (state_dict does that)."""
    import torch

    model = load_model(bundle_dir, module_path)
    _atomically(out_path, lambda path: torch.save(model.state_dict(), path))


def write_onnx(bundle_dir: str, out_path: str, opset: int = 13) -> None:
    """The built-in model's dense graph as ONNX, checked with ``onnx.checker``.

    MLP: input ``features`` float32 [N, input_dim], output ``probabilities`` [N, classes].
    WDL, DEEPFM, DCN: the head after the table lookups -- inputs ``numeric`` float32 [N, 13]
    (NaN = missing), ``deep_rows`` [N, 26, embedding_dim], ``wide_rows`` [N, 26 + crosses] (what
    :meth:`syncopate.models.CtrModel.lookup` gives), output ``probability`` [N]. The batch axis
    is dynamic. The tables stay outside: they are key-value lookups ONNX has no good op for.
    """
    import onnx
    import torch

    from syncopate import models

    bundle = read_bundle(bundle_dir)
    if bundle.model_kind not in BUILTIN_KINDS:
        raise ValueError(f"ONNX export is for the built-in models ({', '.join(BUILTIN_KINDS)}); "
                         f"this bundle's model is {bundle.model_kind}")
    graph = models.OnnxGraph(load_model(bundle, tables=False))
    axes = {name: {0: "batch"} for name in graph.input_names + graph.output_names}

    def export(path: str) -> None:
        with torch.no_grad():
            torch.onnx.export(graph, graph.example_inputs(), path, input_names=graph.input_names,
                              output_names=graph.output_names, dynamic_axes=axes,
                              opset_version=opset)
        onnx.checker.check_model(onnx.load(path))

    _atomically(out_path, export)


def predict(export_dir: str, batch: Any, module_path: Optional[str] = None) -> np.ndarray:
    """The probabilities the model in ``export_dir`` gives a batch, as the cluster's evaluator
    scores it: MLP and classifiers (N x C outputs) their softmax [N, C]; CTR models and other
    binary models (one logit per example) the sigmoid [N]. ``batch`` is what the job's dataset
    gives: images float32 [N, 784] for MLP, ``{"numeric", "categorical"}`` for the CTR models
    (``syncopate.torch.Criteo(path).__getitems__(range(n))[0]``), the user's input for TORCH
    jobs. It reads the bundle on every call: to score many batches, :func:`load_model` once."""
    import torch

    from syncopate import models

    model = load_model(export_dir, module_path)
    with torch.no_grad():
        if isinstance(model, models.Mlp):
            return model.probabilities(torch.as_tensor(batch)).numpy()
        if isinstance(model, models.CtrModel):
            return model.probability(batch).numpy()
        output = model(batch)
        if output.dim() == 2 and output.shape[1] > 1:
            return torch.softmax(output.double(), dim=1).float().numpy()
        return torch.sigmoid(output.reshape(-1).double()).float().numpy()


def _atomically(out_path: str, write) -> None:
    """Runs ``write(temporary)`` beside ``out_path`` and renames: never half a file."""
    directory = os.path.dirname(os.path.abspath(out_path))
    temporary = os.path.join(directory, f".{os.path.basename(out_path)}.tmp{os.getpid()}")
    try:
        write(temporary)
        os.replace(temporary, out_path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m syncopate.export",
        description="Writes a Syncopate export bundle's model as a PyTorch state dict and, for "
                    "the built-in models, as ONNX.")
    parser.add_argument("bundle", help="the export directory (manifest.json, dense.safetensors, "
                                       "tables/)")
    parser.add_argument("--state-dict", dest="state_dict", help="write torch.save(state_dict) "
                                                                "here")
    parser.add_argument("--module", help="a TORCH job's module file (default: the manifest's "
                                         "model.module)")
    parser.add_argument("--onnx", help="write the built-in model's ONNX graph here")
    args = parser.parse_args(argv)
    if not args.state_dict and not args.onnx:
        parser.error("nothing to write: give --state-dict and/or --onnx")
    try:
        if args.state_dict:
            write_state_dict(args.bundle, args.state_dict, args.module)
        if args.onnx:
            write_onnx(args.bundle, args.onnx)
    except (OSError, ValueError, TypeError, AttributeError, ImportError) as e:
        print(f"syncopate.export: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
