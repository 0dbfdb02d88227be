"""Bring your own PyTorch model to a Syncopate cluster.

A job names a Python file (``model { kind: TORCH torch { module: "my_model.py" } }``) that
defines, at its top level:

``model() -> torch.nn.Module``
    The module to train. Its dense parameters (``named_parameters()``, float32) are cut into the
    shards' ranges; its :class:`ShardedEmbedding` tables keep their rows on the shards.
``train_dataset(data) -> Dataset`` and ``test_dataset(data) -> Dataset``
    Datasets indexable by example number (``__len__`` and ``__getitem__``, optionally
    ``__getitems__`` for a whole batch); the coordinator's leases cut the training set. ``data``
    is the job's ``dataset`` section (:class:`DataSpec`). An example is ``(input, target)``.
``loss(output, target) -> Tensor``
    The batch's mean loss (e.g. ``torch.nn.functional.cross_entropy``).

The cluster does the rest: every worker runs Syncopate's C++ worker runtime with this module
hosted in it (leases, pulls, pushes, modes, faults, metrics are the runtime's), so the module sees
only ``torch`` objects. See README "Your own model" and docs/decisions/0013-your-own-model.md.
"""
from syncopate.torch.data import Criteo, DataSpec, FashionMnist
from syncopate.torch.embedding import ShardedEmbedding

__all__ = ["Criteo", "DataSpec", "FashionMnist", "ShardedEmbedding"]
