"""Embedding tables whose rows live on the parameter shards."""
from typing import Optional, Sequence, Union

import torch

# The shards create a row on first touch with U(-init_scale, +init_scale) (a pure function of
# the job seed, the table and the key, so it does not matter which shard creates it): small, so
# a model's first predictions are close to its dense part's, and large enough to break the
# symmetry between rows (the built-in CTR models use the same, libs/model/ctr_model.cc).
DEFAULT_INIT_SCALE = 0.05


class TableRows:
    """The rows of one table that the current batch touches (set by the worker runtime).

    ``keys`` are the batch's distinct ids, sorted; ``rows`` holds their values, one row per key,
    pulled from the shards. Modules naming the same table share one ``TableRows``.
    """

    def __init__(self) -> None:
        self.keys: Optional[torch.Tensor] = None
        self.rows: Optional[torch.Tensor] = None


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

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        slot = self.slot
        if slot is None or slot.keys is None or slot.rows is None:
            raise RuntimeError(
                f"ShardedEmbedding '{self.table}' has no rows: it is looked up inside a "
                "Syncopate worker, which pulls the rows of each batch from the shards")
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

    def extra_repr(self) -> str:
        return (f"table={self.table!r}, dim={self.dim}, features={self.features}, "
                f"pooling={self.pooling}")
