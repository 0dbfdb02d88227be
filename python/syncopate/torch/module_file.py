"""What a PyTorch job's model file defines, as types: :class:`ModuleFile`.

For type checkers and editors; the worker runtime checks nothing more than it did without it (it
loads the file and calls its functions by name: python/syncopate/torch/_host.py). The package
docstring (:mod:`syncopate.torch`) says what each function does.
"""
from typing import Any, Callable, List, Protocol, Tuple, runtime_checkable

import torch

from syncopate.torch.data import DataSpec


@runtime_checkable
class IndexedDataset(Protocol):
    """A dataset indexable by example number, as the leases cut it: ``__len__`` and
    ``__getitem__`` (a ``torch.utils.data.Dataset`` with a length is one). It may also define
    ``__getitems__(indices)``, the examples of a batch in one call."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int, /) -> Any: ...


# collate(examples) -> (input, target), as DataLoader's collate_fn.
Collate = Callable[[List[Any]], Tuple[Any, Any]]


@runtime_checkable
class ModuleFile(Protocol):
    """A TORCH job's model file (``model { kind: TORCH torch { module: "my_model.py" } }``), as
    the worker runtime loads it: a module defining these four at its top level. Each may be a
    function or any callable (``loss = torch.nn.functional.cross_entropy``); the runtime passes
    their arguments by position.

    The file may also define ``collate(examples) -> (input, target)`` (:data:`Collate`); a
    protocol cannot declare an optional member, so it is not one of this class's.
    """

    def model(self) -> torch.nn.Module:
        """The module to train, built anew (the runtime seeds torch first)."""
        ...

    def train_dataset(self, data: DataSpec, /) -> IndexedDataset:
        """The training set; ``data`` is the job's ``dataset`` section."""
        ...

    def test_dataset(self, data: DataSpec, /) -> IndexedDataset:
        """The test set the evaluator scores."""
        ...

    def loss(self, output: Any, target: Any, /) -> torch.Tensor:
        """The batch's mean loss, a scalar tensor."""
        ...
