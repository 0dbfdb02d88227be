"""The worker runtime's side of a user's PyTorch model (private to Syncopate).

The C++ worker runtime (libs/pytorch/torch_workload.cc) owns the protocol: leases, pulls, pushes,
tokens, modes, retries. It hosts one :class:`Host` per worker or evaluator and calls it with
flat float32 buffers it owns (memoryviews, no copies on the way in): the parameters it pulled,
the rows of the batch's keys it pulled, and the gradient buffers it will push. Nothing here talks
to the network or knows a protocol rule.
"""
import importlib.util
import os
import sys
from typing import List, Optional, Sequence

import numpy as np
import torch

from syncopate.torch.data import DataSpec, collate
from syncopate.torch.embedding import ShardedEmbedding, TableRows

REQUIRED = ("model", "train_dataset", "test_dataset", "loss")


def load_user_module(path: str):
    """Imports the job's model file; its directory is importable, as for ``python3 file.py``."""
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
    return module


class _Dense:
    """One dense parameter's place in the flat vector."""

    def __init__(self, name: str, parameter: torch.nn.Parameter, offset: int) -> None:
        self.name = name
        self.parameter = parameter
        self.offset = offset
        self.size = parameter.numel()


class Host:
    """A user's module, its data and its loss, driven by the C++ worker runtime."""

    def __init__(self, module_path: str, seed: int, data: dict, purpose: str) -> None:
        if purpose not in ("describe", "train", "evaluate"):
            raise ValueError(f"unknown purpose {purpose!r}")
        user = load_user_module(module_path)
        self.path = module_path
        # Every process builds the same initial module; the shards start from the coordinator's.
        torch.manual_seed(seed)
        self.model = user.model()
        if not isinstance(self.model, torch.nn.Module):
            raise TypeError(f"{module_path}: model() returned {type(self.model).__name__}, "
                            "not a torch.nn.Module")
        self.loss = user.loss
        self.dense: List[_Dense] = []
        offset = 0
        for name, parameter in self.model.named_parameters():
            if parameter.dtype != torch.float32:
                raise TypeError(f"parameter {name} is {parameter.dtype}; Syncopate's shards hold "
                                "float32 parameters")
            self.dense.append(_Dense(name, parameter, offset))
            offset += parameter.numel()
        self.num_parameters = offset
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
    def layout(self):
        """([(name, shape)], [(table, dim, init_scale)]): the module's parameters and tables."""
        dense = [(d.name, list(d.parameter.shape)) for d in self.dense]
        tables = [(t.table, t.dim, t.init_scale) for t in self.tables]
        return dense, tables

    def initial_values(self) -> np.ndarray:
        """The module's parameters as built, concatenated: what the shards start from."""
        if not self.dense:
            return np.zeros(0, dtype=np.float32)
        with torch.no_grad():
            return torch.cat([d.parameter.detach().reshape(-1) for d in self.dense]).numpy()

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
        batch = collate(self.train_data, list(range(min(2, len(self.train_data)))))
        self._collect_keys(batch)
        for t, slot in enumerate(self.slots):
            slot.rows = torch.zeros(len(slot.keys), self.tables[t].dim, requires_grad=True)
        output = self.model(batch[0])
        loss = self.loss(output, batch[1])
        if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
            raise TypeError("loss(output, target) must return the batch's mean loss as a scalar "
                            "tensor")
        loss.backward()
        self.model.zero_grad(set_to_none=True)
        return "classification" if output.dim() == 2 and output.shape[1] > 1 else "binary"

    # --- training ----------------------------------------------------------------------------
    def prepare(self, examples: np.ndarray) -> List[np.ndarray]:
        """Reads the batch of these example numbers; returns each table's distinct keys."""
        self._batch = collate(self.train_data, examples.tolist())
        return self._collect_keys(self._batch)

    def train_step(self, params, rows: Sequence, grad, row_grads: Sequence) -> float:
        """Forward and backward on the prepared batch at ``params`` (and ``rows``, aligned with
        the keys prepare returned); writes the mean loss's gradient into ``grad`` and
        ``row_grads``."""
        self._bind(params)
        for t, slot in enumerate(self.slots):
            slot.rows = self._view(rows[t], self.tables[t].dim).requires_grad_(True)
        self.model.train()
        for d in self.dense:
            d.parameter.grad = None
        inputs, target = self._batch
        loss = self.loss(self.model(inputs), target)
        loss.backward()
        flat_grad = self._view(grad)
        for d in self.dense:
            out = flat_grad[d.offset:d.offset + d.size]
            if d.parameter.grad is None:  # not in the graph, or frozen
                out.zero_()
            else:
                out.copy_(d.parameter.grad.reshape(-1))
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
        self._batch = collate(self.test_data, list(range(begin, end)))
        return self._collect_keys(self._batch)

    def score(self, params, rows: Sequence):
        """(loss sum, correct, examples, probabilities, labels, classes) of the prepared chunk.

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
                return (loss_sum, correct, count, probability.numpy(),
                        target.to(torch.int32).numpy(), output.shape[1])
            probability = torch.sigmoid(output.reshape(-1).float())
            labels = target.reshape(-1).float()
            correct = int(((probability > 0.5) == (labels > 0.5)).sum())
            return loss_sum, correct, count, probability.numpy(), labels.numpy(), 0

    # --- plumbing ----------------------------------------------------------------------------
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
        """Makes the module's parameters views of the runtime's flat buffer (no copy)."""
        flat = self._view(params)
        if self._bound == flat.data_ptr():
            return
        for d in self.dense:
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
