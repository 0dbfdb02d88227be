"""Embedding tables whose rows live on the parameter shards, or in memory once exported."""
import dataclasses
import json
from typing import Any, Dict, Optional, Sequence, Union

import numpy as np
import torch

from syncopate.keys import Initializer, initial_rows

# The shards create a row on first touch with U(-init_scale, +init_scale) (a pure function of
# the job seed, the table and the key, so it does not matter which shard creates it): small, so
# a model's first predictions are close to its dense part's, and large enough to break the
# symmetry between rows (the built-in CTR models use the same, libs/model/ctr_model.cc).
DEFAULT_INIT_SCALE = 0.05

# What a key without a row reads as (the export manifest's "absent_rows"): its initializer value,
# or zeros in a table that admits keys after a count (ADR 0010, libs/embedding/embedding_table.h).
ABSENT_INITIAL = "initial"
ABSENT_ZEROS = "zeros"
_EXTRA_STATE_FORMAT = "syncopate-table/1"


class TableRows:
    """The rows of one table that the current batch touches (set by the worker runtime).

    ``keys`` are the batch's distinct ids, sorted; ``rows`` holds their values, one row per key,
    pulled from the shards. Modules naming the same table share one ``TableRows``.
    """

    def __init__(self) -> None:
        self.keys: Optional[torch.Tensor] = None
        self.rows: Optional[torch.Tensor] = None


@dataclasses.dataclass
class LocalTable:
    """A whole table in memory, read the way the cluster reads it.

    ``keys`` (int64 [n], the uint64 keys' bit patterns, strictly ascending as int64) and
    ``rows`` (float32 [n, dim], row i belongs to keys[i]); an id without a row reads as
    ``absent_rows`` says: ``"initial"``, the row ``init`` gives it under ``seed`` and the table's
    ``name`` (:func:`syncopate.keys.initial_rows`, what a shard would create), or ``"zeros"``.
    Modules naming the same table share one LocalTable (and so one copy of the rows).
    """
    name: str
    keys: torch.Tensor
    rows: torch.Tensor
    init: Initializer
    seed: Optional[int]
    absent_rows: str = ABSENT_INITIAL

    def __post_init__(self) -> None:
        problem = self._problem()
        if problem:
            raise ValueError(f"table '{self.name}': {problem}")

    def _problem(self) -> str:
        keys, rows = self.keys, self.rows
        if keys.dtype != torch.int64 or keys.dim() != 1:
            return f"keys must be int64 [n], got {keys.dtype} {list(keys.shape)}"
        if rows.dtype != torch.float32 or rows.dim() != 2 or rows.shape[0] != keys.shape[0]:
            return (f"rows must be float32 [{keys.shape[0]}, dim], got {rows.dtype} "
                    f"{list(rows.shape)}")
        if len(keys) > 1 and not bool((keys[1:] > keys[:-1]).all()):
            return "keys must be unique and ascending as int64 (searchsorted finds rows by them)"
        if self.absent_rows not in (ABSENT_INITIAL, ABSENT_ZEROS):
            return f"absent_rows must be '{ABSENT_INITIAL}' or '{ABSENT_ZEROS}', got " \
                   f"{self.absent_rows!r}"
        return ""

    @property
    def dim(self) -> int:
        return int(self.rows.shape[1])

    def gather(self, ids: torch.Tensor) -> torch.Tensor:
        """The rows of ``ids`` (int64 [m]) as the cluster reads them: float32 [m, dim]. Ids
        without a row get their absent value, computed for those ids only."""
        ids = ids.reshape(-1)
        out = torch.zeros(len(ids), self.dim, dtype=torch.float32)
        if len(self.keys) > 0:
            index = torch.searchsorted(self.keys, ids).clamp_(max=len(self.keys) - 1)
            hit = self.keys[index] == ids
            out[hit] = self.rows[index[hit]]
        else:
            hit = torch.zeros(len(ids), dtype=torch.bool)
        if self.absent_rows == ABSENT_ZEROS or self.init.kind == "ZEROS" or bool(hit.all()):
            return out
        if self.seed is None:
            raise ValueError(f"table '{self.name}' does not know the job's seed, so rows it does "
                             "not hold cannot be initialised: load a state dict written by "
                             "syncopate.export (its _extra_state carries the seed)")
        missing = ids[~hit]
        values = initial_rows(self.init, self.seed, self.name,
                              missing.numpy().view(np.uint64), self.dim)
        out[~hit] = torch.from_numpy(values)
        return out


class ShardedEmbedding(torch.nn.Module):
    """An embedding table on the shards, looked up by 64-bit ids (like ``torch.nn.Embedding``).

    Rows are not parameters of the module: before each step the worker runtime reads the ids of
    the batch's ``features`` (entries of the batch's input, which must then be a mapping),
    pulls those rows from the shards (each row from the shard that owns its key), and after the
    backward pass pushes their gradients, which the shards apply with the job's optimizer
    (lazily: untouched rows and their optimizer state never change), admission and eviction.
    The table holds any number of rows; a worker only ever holds those of its batch.

    ``forward(ids)`` takes an int64 tensor of ids drawn from the batch's ``features`` and returns
    ``ids.shape + (dim,)``; with ``pooling`` "sum" or "mean" the last dimension of ``ids`` is
    pooled (``torch.nn.EmbeddingBag``), giving ``ids.shape[:-1] + (dim,)``. Ids are any int64
    (negative ones too: they are the keys' bit patterns); keep the ids of different fields
    apart if they share a table (e.g. by hashing the field in, as
    :class:`syncopate.torch.Criteo` does).

    Several modules may name the same ``table``: they share its rows.

    **Local mode** (outside the cluster): the whole table in memory (:class:`LocalTable`), any
    id looked up, an id without a row reading what the cluster reads for it. A model leaves the
    cluster through plain PyTorch: ``syncopate.export`` writes a state dict in which every
    ShardedEmbedding has ``<prefix>keys`` (int64 [n]), ``<prefix>weight`` (float32 [n, dim])
    and ``<prefix>_extra_state`` (table, seed, initializer, absent-row rule), and
    ``model.load_state_dict(torch.load(path), strict=True)`` on a fresh ``model()`` puts every
    ShardedEmbedding in local mode. The rows are adopted, not copied, so modules of one table
    loaded from one file share them. Local mode is for scoring: its rows take no gradient.
    Inside a worker (``slot`` set by the runtime) the module behaves as without local mode, and
    neither the keys nor the rows are parameters or buffers, so the runtime never sees them.
    """

    def __init__(self, table: str, dim: int, features: Union[str, Sequence[str]], *,
                 pooling: Optional[str] = None, init_scale: float = DEFAULT_INIT_SCALE) -> None:
        super().__init__()
        if not table:
            raise ValueError("ShardedEmbedding needs a table name")
        if dim <= 0:
            raise ValueError(f"ShardedEmbedding '{table}': dim must be positive, got {dim}")
        if pooling not in (None, "sum", "mean"):
            raise ValueError(f"ShardedEmbedding '{table}': pooling must be None, 'sum' or 'mean'")
        if not init_scale >= 0:
            raise ValueError(f"ShardedEmbedding '{table}': init_scale must be >= 0")
        self.table = table
        self.dim = int(dim)
        self.features = (features,) if isinstance(features, str) else tuple(features)
        if not self.features:
            raise ValueError(f"ShardedEmbedding '{table}' reads no features")
        self.pooling = pooling
        self.init_scale = float(init_scale)
        self.slot: Optional[TableRows] = None  # the runtime's, shared by the table's modules
        self.local: Optional[LocalTable] = None  # local mode's whole table
        # What the loaded _extra_state said, until keys and rows arrive (_load_from_state_dict).
        self._loaded_state: Optional[Dict[str, Any]] = None

    # --- lookups -----------------------------------------------------------------------------
    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        slot = self.slot
        if slot is None and self.local is not None:
            slot = self._pull_local(ids)
        if slot is None or slot.keys is None or slot.rows is None:
            raise RuntimeError(
                f"ShardedEmbedding '{self.table}' has no rows: it is looked up inside a "
                "Syncopate worker, which pulls the rows of each batch from the shards, or after "
                "load_state_dict of an exported model (syncopate.export)")
        if ids.dtype != torch.int64:
            raise TypeError(f"ShardedEmbedding '{self.table}': ids must be int64, got {ids.dtype}")
        keys = slot.keys
        index = torch.searchsorted(keys, ids).clamp_(max=max(len(keys) - 1, 0))
        if len(keys) == 0 or not torch.equal(keys[index], ids):
            raise ValueError(
                f"ShardedEmbedding '{self.table}' was called with ids that are not in the "
                f"batch's {', '.join(self.features)}: only those rows were pulled")
        # torch's own embedding ops over the pulled rows: the same forward and backward as an
        # nn.Embedding / nn.EmbeddingBag holding exactly these rows, bit for bit.
        if self.pooling is None:
            return torch.nn.functional.embedding(index, slot.rows)
        bags = index.reshape(-1, index.shape[-1])
        pooled = torch.nn.functional.embedding_bag(bags, slot.rows, mode=self.pooling)
        return pooled.reshape(*index.shape[:-1], self.dim)

    def _pull_local(self, ids: torch.Tensor) -> TableRows:
        """What the runtime would have pulled for ``ids``, from the local table: the distinct
        ids, sorted, and their rows. The lookup then runs the cluster's own code on them, so
        local mode computes exactly what a worker computes."""
        local = self.local
        assert local is not None
        if local.rows.requires_grad:
            raise NotImplementedError(
                f"ShardedEmbedding '{self.table}': local mode is for scoring an exported model; "
                "its rows take no gradient (train inside a Syncopate cluster)")
        if ids.dtype != torch.int64:
            raise TypeError(f"ShardedEmbedding '{self.table}': ids must be int64, got {ids.dtype}")
        rows = TableRows()
        rows.keys = torch.unique(ids)
        rows.rows = local.gather(rows.keys)
        return rows

    def requires_grad_(self, requires_grad: bool = True) -> "ShardedEmbedding":
        if requires_grad and self.local is not None:
            raise NotImplementedError(
                f"ShardedEmbedding '{self.table}': local mode is for scoring an exported model; "
                "its rows take no gradient (train inside a Syncopate cluster)")
        return super().requires_grad_(requires_grad)

    # --- local mode --------------------------------------------------------------------------
    def use_local_table(self, table: LocalTable) -> None:
        """Enters local mode with ``table`` (shared, not copied). The table's name and width must
        be this module's."""
        if table.name != self.table or table.dim != self.dim:
            raise ValueError(f"ShardedEmbedding '{self.table}' (dim {self.dim}) cannot use table "
                             f"'{table.name}' of dim {table.dim}")
        self.local = table

    def get_extra_state(self) -> Dict[str, Any]:
        """What local mode needs besides the rows: the cluster's rule for ids without a row.

        Only strings, ints and None, so ``torch.load(path, weights_only=True)`` reads the file
        (the default from torch 2.6; torch 1.13's safe unpickler has no floats): the
        initializer is its manifest JSON, as text."""
        if self.local is not None:
            init, seed, absent = self.local.init, self.local.seed, self.local.absent_rows
        else:
            init, seed, absent = self._own_initializer(), None, ABSENT_INITIAL
        return {"format": _EXTRA_STATE_FORMAT, "table": self.table, "dim": self.dim,
                "seed": seed, "initializer": json.dumps(init.to_json()), "absent_rows": absent}

    def set_extra_state(self, state: Any) -> None:
        if not isinstance(state, dict) or state.get("format") != _EXTRA_STATE_FORMAT:
            raise ValueError(f"ShardedEmbedding '{self.table}': the state dict's _extra_state is "
                             f"not a {_EXTRA_STATE_FORMAT} record")
        if state.get("table") != self.table or state.get("dim") != self.dim:
            raise ValueError(f"ShardedEmbedding '{self.table}' (dim {self.dim}) was given the "
                             f"state of table '{state.get('table')}' (dim {state.get('dim')})")
        self._loaded_state = state

    def _own_initializer(self) -> Initializer:
        # A TORCH job's table: UNIFORM(init_scale), or ZEROS for 0 (libs/job/torch_kind.cc).
        if self.init_scale > 0:
            return Initializer("UNIFORM", scale=self.init_scale)
        return Initializer("ZEROS")

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        if self.local is not None:
            destination[prefix + "keys"] = self.local.keys
            destination[prefix + "weight"] = self.local.rows

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        names = (prefix + "keys", prefix + "weight")
        # The base class reports every entry under the prefix that is not a parameter or buffer
        # as unexpected: it sees the others only.
        others = {k: v for k, v in state_dict.items()
                  if k.startswith(prefix) and k not in names}
        self._loaded_state = None
        super()._load_from_state_dict(others, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)
        present = [name in state_dict for name in names]
        if not all(present):
            if strict:
                missing_keys.extend(n for n, p in zip(names, present) if not p)
            return
        state = self._loaded_state or {}
        init = (Initializer.from_json(json.loads(state["initializer"])) if "initializer" in state
                else self._own_initializer())
        try:
            table = LocalTable(name=self.table, keys=state_dict[names[0]],
                               rows=state_dict[names[1]], init=init, seed=state.get("seed"),
                               absent_rows=state.get("absent_rows", ABSENT_INITIAL))
            self.use_local_table(table)
        except (ValueError, AttributeError) as e:
            error_msgs.append(f"{prefix}keys / {prefix}weight: {e}")

    def extra_repr(self) -> str:
        text = (f"table={self.table!r}, dim={self.dim}, features={self.features}, "
                f"pooling={self.pooling}")
        if self.local is not None:
            text += f", local rows={len(self.local.keys)}"
        return text
