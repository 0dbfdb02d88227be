"""Datasets a PyTorch model can train on, read by Syncopate's own C++ readers.

They read files the way the built-in models do (libs/data): Fashion-MNIST's IDX files and
Criteo-format TSV (plain or gzip, globs, larger than memory), so a PyTorch job and a built-in job
see the same examples. Both implement ``__getitems__`` so a batch is one call into C++.

Outside Syncopate's processes (no ``syncopate_native``: a notebook, a test, a tool scoring an
exported model) both read with :mod:`syncopate.readers` instead, numpy ports of the same readers
that give the same tensors, so an exported model is scored on exactly the examples it was
evaluated on in the cluster.
"""
import dataclasses
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from syncopate import readers
from syncopate.keys import criteo_keys

try:  # the worker runtime's embedded module (libs/pytorch/native_module.cc)
    import syncopate_native as _native
except ImportError:  # outside a Syncopate process: syncopate.readers reads the files
    _native = None


@dataclasses.dataclass(frozen=True)
class DataSpec:
    """The job's ``dataset`` section, as the job spec gives it (protos/syncopate/v1/job.proto)."""
    kind: str = "KIND_UNSPECIFIED"
    dir: str = ""
    train_path: str = ""
    test_path: str = ""
    train_limit: int = 0
    test_limit: int = 0
    block_size: int = 1000  # the job's lease block: what a worker's batches are drawn from


class FashionMnist(torch.utils.data.Dataset):
    """Fashion-MNIST from its IDX files (Debian's dataset-fashion-mnist): 60k / 10k images.

    An example is ``(image, label)``: 784 float32 pixels in [0, 1] and an int64 class.
    """

    def __init__(self, directory: str, split: str, limit: int = 0) -> None:
        if split not in ("train", "test"):
            raise ValueError(f"FashionMnist split must be 'train' or 'test', got {split!r}")
        if _native is not None:
            features, labels = _native.load_fashion_mnist(directory, split, int(limit))
        else:
            features, labels = readers.load_fashion_mnist(directory, split, int(limit))
        self.images = torch.from_numpy(features)
        self.labels = torch.from_numpy(labels)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> Tuple[torch.Tensor, torch.Tensor]:
        return self.images[i], self.labels[i]

    def __getitems__(self, indices: Sequence[int]) -> Tuple[torch.Tensor, torch.Tensor]:
        index = torch.as_tensor(indices, dtype=torch.int64)
        return self.images[index], self.labels[index]


# The forms `Criteo(numeric=...)` gives the 13 numeric columns in: as read, or as the built-in
# CTR models feed them to their linear part and MLP (ctr_numeric_inputs).
NUMERIC_FORMS = ("raw", "log1p", "log1p_missing")


def ctr_numeric_inputs(numeric: torch.Tensor, missing_indicators: bool) -> torch.Tensor:
    """The numeric inputs of the built-in CTR models (``model::TransformNumeric``) from raw
    columns (float32 [N, 13], NaN = missing): log1p(max(x, 0)) with a missing value as 0, then,
    with ``missing_indicators``, one 0/1 flag per column (ADR 0016): float32 [N, 13] or [N, 26].

    Heavy-tailed counts (Criteo's span 0 to 10^6+) enter a model through a weight or a layer
    after this transform, not as factors of the FM's or the cross layers' products (ADR 0020).
    """
    missing = torch.isnan(numeric)
    # Not nan_to_num: +inf stays inf; relu is max(x, 0), and exports to ONNX as one op.
    x = torch.log1p(torch.relu(torch.where(missing, torch.zeros_like(numeric), numeric)))
    if missing_indicators:
        x = torch.cat([x, missing.to(torch.float32)], dim=1)
    return x


class Criteo(torch.utils.data.Dataset):
    """Criteo-format click logs (label, 13 integer and 26 categorical columns), read from disk.

    ``path`` is a file, a glob or a comma-separated list of either, plain or gzip; the rows stay
    on disk and are parsed a block of ``block_size`` rows at a time (the last ``cached_blocks``
    kept), so the dataset may be far larger than memory. An example is ``(features, label)``
    with ``features = {"numeric": float32[13] (NaN where missing), "categorical": int64[26]}``:
    each categorical value as a 64-bit key that also encodes its column (the built-in CTR models'
    keys), ready for a :class:`ShardedEmbedding` over all 26 columns.

    ``numeric`` chooses the form of the numeric columns: ``"raw"`` (the counts as read, NaN where
    missing), ``"log1p"`` (float32[13]) or ``"log1p_missing"`` (float32[26], with a missing flag
    per column): the built-in CTR models' inputs (:func:`ctr_numeric_inputs`), so a PyTorch model
    gets the numerics treatment ADR 0020 measured without writing it.

    Without ``syncopate_native`` (outside Syncopate's processes) the rows are read into memory
    when the dataset is made (:func:`syncopate.readers.read_criteo`, about 300 bytes a row), so
    a bad line fails here rather than on the read that reaches it; ``block_size`` and
    ``cached_blocks`` are then only checked. The tensors are the same.
    """

    def __init__(self, path: str, limit: int = 0, block_size: int = 1000,
                 cached_blocks: int = 4, numeric: str = "raw") -> None:
        if numeric not in NUMERIC_FORMS:
            raise ValueError(f"Criteo numeric must be one of {', '.join(NUMERIC_FORMS)}, "
                             f"got {numeric!r}")
        self._numeric_form = numeric
        if _native is not None:
            self._reader = _native.CriteoReader(path, int(limit), int(block_size),
                                                int(cached_blocks))
        else:
            self._reader = _CriteoInMemory(path, int(limit), int(block_size), int(cached_blocks))

    def __len__(self) -> int:
        return self._reader.rows()

    def __getitem__(self, i: int) -> Tuple[Dict[str, torch.Tensor], torch.Tensor]:
        features, labels = self.__getitems__([i])
        return {k: v[0] for k, v in features.items()}, labels[0]

    def __getitems__(self, indices: Sequence[int]) -> Tuple[Dict[str, torch.Tensor],
                                                             torch.Tensor]:
        numeric, keys, labels = self._reader.read(list(indices))
        features = torch.from_numpy(numeric)
        if self._numeric_form != "raw":
            features = ctr_numeric_inputs(features, self._numeric_form == "log1p_missing")
        return ({"numeric": features, "categorical": torch.from_numpy(keys)},
                torch.from_numpy(labels))


class _CriteoInMemory:
    """The native CriteoReader's interface over rows read by :mod:`syncopate.readers`."""

    def __init__(self, path: str, limit: int, block_size: int, cached_blocks: int) -> None:
        if block_size < 1 or cached_blocks < 1:
            raise ValueError("cached_blocks and block_size must be >= 1")
        rows = readers.read_criteo(path, limit)
        self._numeric = rows.numeric
        # The keys' bits as int64, as the native reader gives them (torch has no uint64).
        self._keys = criteo_keys(rows.values).view(np.int64)
        self._labels = rows.labels

    def rows(self) -> int:
        return len(self._labels)

    def read(self, examples: List[int]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        index = np.asarray(examples, dtype=np.int64).reshape(-1)
        bad = (index < 0) | (index >= len(self._labels))
        if bad.any():
            e = int(index[bad][0])
            raise IndexError(f"example {e} is outside the training set's {len(self._labels)}")
        return self._numeric[index], self._keys[index], self._labels[index]


def collate(dataset: torch.utils.data.Dataset, indices: List[int],
            collate_fn: Optional[Callable[[Any], Any]] = None):
    """The batch of ``indices``, as torch's ``DataLoader`` makes it.

    The examples are the dataset's ``__getitems__(indices)`` if it has one, else the list of
    ``dataset[i]``. With the module's ``collate_fn`` (its ``collate(examples)``) the batch is
    ``collate_fn(examples)``: what ``DataLoader(dataset, collate_fn=collate_fn)`` makes. Without
    one, a list (torch's ``__getitems__`` contract: one example per index) goes through torch's
    default collate, and anything else ``__getitems__`` returns is already the batch (Syncopate's
    datasets return ``(input, target)`` of the whole batch: one call into C++ per batch).
    """
    getitems = getattr(dataset, "__getitems__", None)
    examples = getitems(indices) if getitems is not None else [dataset[i] for i in indices]
    if collate_fn is not None:
        return collate_fn(examples)
    if isinstance(examples, list):
        return torch.utils.data.default_collate(examples)
    return examples
