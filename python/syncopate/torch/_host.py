"""The worker runtime's side of a user's PyTorch model (private to Syncopate).

The C++ worker runtime (libs/pytorch/torch_model.cc) owns the protocol: leases, pulls, pushes,
tokens, modes, retries. It hosts one :class:`Host` per worker or evaluator and calls it with
flat float32 buffers it owns (memoryviews, no copies on the way in): the parameters it pulled,
the rows of the batch's keys it pulled, and the gradient buffers it will push. Nothing here talks
to the network or knows a protocol rule.
"""
import hashlib
import importlib.util
import os
import random
import sys
from typing import List, NamedTuple, Optional, Sequence, cast

import numpy as np
import torch

from syncopate.torch import _support
from syncopate.torch.data import DataSpec, collate
from syncopate.torch.embedding import ShardedEmbedding, TableRows
from syncopate.torch.module_file import Collate, ModuleFile

REQUIRED = ("model", "train_dataset", "test_dataset", "loss")  # ModuleFile's members
OPTIONAL = ("collate",)  # collate(examples) -> (input, target), as DataLoader's collate_fn


def load_user_module(path: str) -> ModuleFile:
    """Imports the job's model file; its directory is importable, as for ``python3 file.py``.
    Refuses a file that lacks one of :class:`ModuleFile`'s functions or whose ``collate`` is not
    callable."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"model.torch.module {path!r} is not a file")
    directory = os.path.dirname(os.path.abspath(path))
    if directory not in sys.path:
        sys.path.insert(0, directory)
    name = "syncopate_user_model_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    missing = [f for f in REQUIRED if not callable(getattr(module, f, None))]
    if missing:
        raise AttributeError(
            f"{path} defines no {', '.join(missing)}: a PyTorch job's module defines model(), "
            "train_dataset(data), test_dataset(data) and loss(output, target)")
    for name in OPTIONAL:
        if hasattr(module, name) and not callable(getattr(module, name)):
            raise TypeError(f"{path}: {name} is {type(getattr(module, name)).__name__}, not a "
                            "function (collate(examples) -> (input, target), as DataLoader's "
                            "collate_fn)")
    return cast(ModuleFile, module)


class TensorRecord(NamedTuple):
    """One dense tensor of the flat vector, as the C++ side reads it (by attribute)."""
    name: str
    shape: List[int]
    buffer: bool  # a buffer (ADR 0018), not a parameter
    dtype: str    # the module's own dtype, e.g. "float32", "int64"


class TableRecord(NamedTuple):
    """One embedding table: its rows start U(-init_scale, +init_scale) (zeros for 0)."""
    name: str
    dim: int
    init_scale: float


class Layout(NamedTuple):
    """What the shards hold for a module: its dense tensors (the flat vector's order: parameters,
    then buffers) and its tables (table-id order)."""
    dense: List[TensorRecord]
    tables: List[TableRecord]


class Scores(NamedTuple):
    """A scored evaluation chunk, as the C++ side reads it (by attribute): sums and counts, and
    the scores and labels the runtime computes the AUCs of (libs/model/auc.h)."""
    loss_sum: float             # the chunk's mean loss times its examples
    correct: int
    examples: int
    probabilities: np.ndarray   # float32: N x C softmax (a classifier) or N sigmoids (binary)
    labels: np.ndarray          # int32 class ids (a classifier) or float32 0/1 (binary)
    classes: int                # C for a classifier, 0 for a binary model


class _Dense:
    """One dense tensor's place in the flat vector: a parameter, or a buffer (ADR 0018)."""

    def __init__(self, name: str, tensor: torch.Tensor, offset: int, buffer: bool,
                 owner: Optional[torch.nn.Module] = None, attribute: str = "") -> None:
        self.name = name
        self.parameter = tensor
        self.offset = offset
        self.size = tensor.numel()
        self.buffer = buffer
        self.owner = owner          # buffers: the module holding it, and its attribute name
        self.attribute = attribute
        self.shape = tuple(tensor.shape)
        self.dtype = tensor.dtype

    def current(self) -> torch.Tensor:
        """A buffer's tensor as the module holds it now (a module may rebind it in forward)."""
        return self.owner._buffers[self.attribute]


class Host:
    """A user's module, its data and its loss, driven by the C++ worker runtime."""

    def __init__(self, module_path: str, seed: int, data: dict, purpose: str) -> None:
        if purpose not in ("describe", "train", "evaluate"):
            raise ValueError(f"unknown purpose {purpose!r}")
        user = load_user_module(module_path)
        self.path = module_path
        self.seed = int(seed)
        # Every process builds the same initial module; the shards start from the coordinator's.
        torch.manual_seed(seed)
        self.model = user.model()
        if not isinstance(self.model, torch.nn.Module):
            raise TypeError(f"{module_path}: model() returned {type(self.model).__name__}, "
                            "not a torch.nn.Module")
        self.loss = user.loss
        self.collate_fn: Optional[Collate] = getattr(user, "collate", None)
        # What the shards cannot hold is refused here, one line naming it (_support.py).
        _support.check_sparse_modules(self.model)
        self.dense: List[_Dense] = []
        offset = 0
        for name, parameter in self.model.named_parameters():
            _support.check_parameter(name, parameter)
            self.dense.append(_Dense(name, parameter, offset, buffer=False))
            offset += parameter.numel()
        # Buffers (BatchNorm's running statistics, registered masks): the shards hold them too,
        # so the evaluator, checkpoints and exports see what training made of them (ADR 0018).
        self.buffers: List[_Dense] = []
        for name, owner, attribute, buffer in _named_buffers(self.model):
            _support.check_buffer(name, buffer)
            dense = _Dense(name, buffer, offset, buffer=True, owner=owner, attribute=attribute)
            self.dense.append(dense)
            self.buffers.append(dense)
            offset += buffer.numel()
        self.parameters_only = [d for d in self.dense if not d.buffer]
        _support.check_no_shared_memory(
            [("buffer" if d.buffer else "parameter", d.name, d.parameter) for d in self.dense])
        self.num_parameters = offset  # the flat vector's length: parameters and buffers
        # Tables in first-seen order; modules naming the same table share its rows.
        self.tables: List[ShardedEmbedding] = []
        self.slots: List[TableRows] = []
        self.table_features: List[List[str]] = []
        for module in self.model.modules():
            if not isinstance(module, ShardedEmbedding):
                continue
            names = [t.table for t in self.tables]
            if module.table in names:
                t = names.index(module.table)
                if self.tables[t].dim != module.dim:
                    raise ValueError(f"table '{module.table}' is declared with dim "
                                     f"{self.tables[t].dim} and {module.dim}")
                for feature in module.features:
                    if feature not in self.table_features[t]:
                        self.table_features[t].append(feature)
            else:
                self.tables.append(module)
                self.slots.append(TableRows())
                self.table_features.append(list(module.features))
                t = len(self.tables) - 1
            module.slot = self.slots[t]
        spec = DataSpec(**data)
        self.train_limit = spec.train_limit
        self.test_limit = spec.test_limit
        self.train_data = user.train_dataset(spec) if purpose != "evaluate" else None
        self.test_data = user.test_dataset(spec) if purpose == "evaluate" else None
        self._bound = None  # data_ptr of the flat buffer the parameters are views into
        self._batch = None

    # --- what the coordinator reads once: the layout the shards hold -------------------------
    def layout(self) -> Layout:
        """The module's parameters, buffers and tables, as the shards hold them."""
        dense = [TensorRecord(d.name, list(d.shape), d.buffer, str(d.dtype).replace("torch.", ""))
                 for d in self.dense]
        tables = [TableRecord(t.table, t.dim, t.init_scale) for t in self.tables]
        return Layout(dense, tables)

    def initial_values(self) -> np.ndarray:
        """The module's parameters and buffers as built, concatenated: what the shards start
        from."""
        if not self.dense:
            return np.zeros(0, dtype=np.float32)
        with torch.no_grad():
            return torch.cat([d.parameter.detach().reshape(-1).to(torch.float32)
                              for d in self.dense]).numpy()

    def train_size(self) -> int:
        return len(self.train_data)

    def eval_size(self) -> int:
        n = len(self.test_data)
        return min(n, self.test_limit) if self.test_limit > 0 else n

    def check(self) -> str:
        """One step on the first two training examples with zero rows, so a module, dataset or
        loss that cannot train fails the job at start, with its traceback, not on the workers.
        Returns the task the output shows: "classification" (N x C logits, C > 1) or "binary"
        (one logit per example)."""
        batch = self._read(self.train_data, list(range(min(2, len(self.train_data)))))
        self._collect_keys(batch)
        for t, slot in enumerate(self.slots):
            slot.rows = torch.zeros(len(slot.keys), self.tables[t].dim, requires_grad=True)
        self.model.train()
        output = self.model(batch[0])
        loss = self.loss(output, batch[1])
        if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
            raise TypeError("loss(output, target) must return the batch's mean loss as a scalar "
                            "tensor")
        loss.backward()
        _support.check_sparse_gradients((d.name, d.parameter) for d in self.parameters_only)
        self.model.zero_grad(set_to_none=True)
        return "classification" if output.dim() == 2 and output.shape[1] > 1 else "binary"

    # --- training ----------------------------------------------------------------------------
    def prepare(self, examples: np.ndarray) -> List[np.ndarray]:
        """Reads the batch of these example numbers; returns each table's distinct keys.

        Seeds torch's, NumPy's and Python's generators from the job's seed and the batch's own
        examples first (:func:`batch_seed`), so the randomness of a batch (the dataset's
        augmentation here, dropout in its step) differs from worker to worker and batch to batch,
        and is the same whichever worker runs the batch, in a rerun too."""
        _seed_everything(batch_seed(self.seed, examples))
        self._batch = self._read(self.train_data, examples.tolist())
        return self._collect_keys(self._batch)

    def train_step(self, params, rows: Sequence, grad, row_grads: Sequence) -> float:
        """Forward and backward on the prepared batch at ``params`` (and ``rows``, aligned with
        the keys prepare returned); writes the mean loss's gradient into ``grad`` and
        ``row_grads``."""
        self._bind(params)
        for t, slot in enumerate(self.slots):
            slot.rows = self._view(rows[t], self.tables[t].dim).requires_grad_(True)
        self.model.train()
        for d in self.parameters_only:
            d.parameter.grad = None
        inputs, target = self._batch
        loss = self.loss(self.model(inputs), target)
        loss.backward()
        flat_grad = self._view(grad)
        for d in self.parameters_only:
            out = flat_grad[d.offset:d.offset + d.size]
            if d.parameter.grad is None:  # not in the graph, or frozen
                out.zero_()
            elif d.parameter.grad.layout != torch.strided:
                raise TypeError(f"parameter {d.name} {_support.SPARSE_GRADIENT}")
            else:
                out.copy_(d.parameter.grad.reshape(-1))
        # A buffer's "gradient" is the change this step made to it; the shards add the global
        # batch's mean change (ADR 0018).
        flat = self._view(params)
        with torch.no_grad():
            for d in self.buffers:
                now = d.current()
                if now.numel() != d.size:
                    raise ValueError(f"buffer {d.name} changed its size from {d.size} to "
                                     f"{now.numel()} during a step; the shards hold buffers of a "
                                     "fixed shape")
                torch.sub(now.reshape(-1).to(torch.float32), flat[d.offset:d.offset + d.size],
                          out=flat_grad[d.offset:d.offset + d.size])
        for t, slot in enumerate(self.slots):
            out = self._view(row_grads[t], self.tables[t].dim)
            if slot.rows.grad is None:
                out.zero_()
            else:
                out.copy_(slot.rows.grad)
            slot.rows = None
        return float(loss)

    # --- evaluation --------------------------------------------------------------------------
    def prepare_eval(self, begin: int, end: int) -> List[np.ndarray]:
        self._batch = self._read(self.test_data, list(range(begin, end)))
        return self._collect_keys(self._batch)

    def score(self, params, rows: Sequence) -> Scores:
        """The prepared chunk's :class:`Scores`.

        A classifier (N x C logits, C > 1) gives its softmax (N x C) and int32 labels, and
        ``classes`` = C: accuracy counts argmax hits, the AUC is one-vs-rest. A binary model (one
        logit per example) gives its sigmoid and float labels, and ``classes`` = 0: the AUC is
        the click-through one. The runtime computes the AUCs (libs/model/auc.h).
        """
        self._bind(params)
        for t, slot in enumerate(self.slots):
            slot.rows = self._view(rows[t], self.tables[t].dim)
        self.model.eval()
        inputs, target = self._batch
        with torch.no_grad():
            output = self.model(inputs)
            count = len(target)
            loss_sum = float(self.loss(output, target)) * count
            if output.dim() == 2 and output.shape[1] > 1:
                correct = int((output.argmax(dim=1) == target).sum())
                probability = torch.softmax(output.float(), dim=1)
                return Scores(loss_sum, correct, count, probability.numpy(),
                              target.to(torch.int32).numpy(), output.shape[1])
            probability = torch.sigmoid(output.reshape(-1).float())
            labels = target.reshape(-1).float()
            correct = int(((probability > 0.5) == (labels > 0.5)).sum())
            return Scores(loss_sum, correct, count, probability.numpy(), labels.numpy(), 0)

    # --- plumbing ----------------------------------------------------------------------------
    def _read(self, dataset, indices: List[int]):
        """The batch of ``indices`` (the module's ``collate`` if it has one), as (input, target)."""
        batch = collate(dataset, indices, self.collate_fn)
        if not isinstance(batch, (tuple, list)) or len(batch) != 2:
            source = "collate(examples)" if self.collate_fn is not None else "the dataset's batch"
            raise TypeError(f"{source} gave {type(batch).__name__}, not (input, target): an "
                            "example and a batch are (input, target) pairs")
        return batch

    def _collect_keys(self, batch) -> List[np.ndarray]:
        inputs = batch[0]
        keys = []
        for t, slot in enumerate(self.slots):
            if not isinstance(inputs, dict):
                raise TypeError(f"table '{self.tables[t].table}' reads the batch's "
                                f"{self.table_features[t]}: the input must be a mapping")
            ids = []
            for feature in self.table_features[t]:
                if feature not in inputs:
                    raise KeyError(f"table '{self.tables[t].table}' reads the batch's "
                                   f"'{feature}', which the dataset does not give")
                ids.append(torch.as_tensor(inputs[feature]).reshape(-1).to(torch.int64))
            slot.keys = torch.unique(torch.cat(ids))  # sorted, as ShardedEmbedding searches
            keys.append(slot.keys.numpy().view(np.uint64))
        return keys

    def _bind(self, params) -> None:
        """Makes the module's parameters views of the runtime's flat buffer (no copy), and sets
        its buffers from it (copies in the module's dtype: forward may change them in place, and
        the step's change is measured against the pulled values)."""
        flat = self._view(params)
        with torch.no_grad():
            for d in self.buffers:
                values = flat[d.offset:d.offset + d.size].view(d.shape)
                d.owner._buffers[d.attribute] = values.to(d.dtype, copy=True)
        if self._bound == flat.data_ptr():
            return
        for d in self.parameters_only:
            d.parameter.data = flat[d.offset:d.offset + d.size].view(d.parameter.shape)
        self._bound = flat.data_ptr()

    @staticmethod
    def _view(buffer, dim: Optional[int] = None) -> torch.Tensor:
        """A float32 tensor over a runtime buffer (shared memory, not a copy)."""
        if memoryview(buffer).nbytes == 0:
            flat = torch.zeros(0, dtype=torch.float32)
        else:
            flat = torch.frombuffer(buffer, dtype=torch.float32)
        return flat if dim is None else flat.view(-1, dim)


def _named_buffers(model: torch.nn.Module):
    """(name, owning module, attribute, tensor) of every buffer, in ``named_buffers()`` order,
    each once (a buffer shared by two modules is held once, like a shared parameter)."""
    seen = set()
    for prefix, module in model.named_modules():
        for attribute, buffer in module._buffers.items():
            if buffer is None or id(buffer) in seen:
                continue
            seen.add(id(buffer))
            yield (f"{prefix}.{attribute}" if prefix else attribute), module, attribute, buffer


def batch_seed(job_seed: int, examples: np.ndarray) -> int:
    """A seed for a training batch: the job's seed mixed with a 64-bit digest of every example
    number of the batch, in order (BLAKE2b, then splitmix64 as the cluster derives every seed).
    Workers train disjoint examples, so their dropout masks and augmentations differ, unlike a job
    seed given to every worker; a batch sees the same randomness whichever worker runs it. ~3 us
    a step (the numpy version of this took 29 us of a ~1 ms step)."""
    data = np.ascontiguousarray(examples, dtype=np.int64).tobytes()
    digest = int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")
    return _derive_seed(int(job_seed), digest) & ((1 << 63) - 1)


_MASK = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    """libs/common/splitmix64.h on Python ints (one value: no numpy call overhead)."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _derive_seed(parent: int, value: int) -> int:
    """DeriveSeed: splitmix64(parent ^ splitmix64(value))."""
    return _splitmix64((parent & _MASK) ^ _splitmix64(value & _MASK))


def _seed_everything(seed: int) -> None:
    # The CPU generator directly: torch.manual_seed also walks every other backend's (25 us).
    torch.default_generator.manual_seed(seed)
    np.random.seed(seed & 0xFFFFFFFF)
    random.seed(seed)
