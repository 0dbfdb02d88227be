"""Bring your own PyTorch model to a Syncopate cluster.

A job names a Python file (``model { kind: TORCH torch { module: "my_model.py" } }``) that
defines, at its top level:

``model() -> torch.nn.Module``
    The module to train. Its dense parameters (``named_parameters()``, float32) are cut into the
    shards' ranges; its :class:`ShardedEmbedding` tables keep their rows on the shards.
``train_dataset(data) -> Dataset`` and ``test_dataset(data) -> Dataset``
    Datasets indexable by example number (``__len__`` and ``__getitem__``, optionally
    ``__getitems__(indices)``); the coordinator's leases cut the training set. ``data`` is the
    job's ``dataset`` section (:class:`DataSpec`).
``loss(output, target) -> Tensor``
    The batch's mean loss (e.g. ``torch.nn.functional.cross_entropy``).

and, optionally:

``collate(examples) -> (input, target)``
    Makes a batch of a list of examples (whatever ``__getitem__`` returns: dicts, sequences of
    different lengths), as ``DataLoader(dataset, collate_fn=collate)`` would; if the dataset has
    ``__getitems__``, it gets what that returns, as in a DataLoader. Without it, a batch is
    ``__getitems__``'s if that returns anything but a list (Syncopate's datasets return a whole
    batch), else torch's ``default_collate`` of the examples.

A batch is ``(input, target)``: ``input`` is what ``model`` takes (a tensor, or a mapping whose
entries the :class:`ShardedEmbedding` tables read by feature name), ``target`` what ``loss``
takes.

Not every module fits the shards: float32 parameters with dense gradients, buffers of real,
integer or bool dtypes whose values float32 holds exactly, no two tensors sharing memory (tie
parameters by assigning the same ``Parameter``), no lazy modules. Anything else is refused when
the job starts, with one line naming the parameter or buffer and why.

The cluster does the rest: every worker runs Syncopate's C++ worker runtime with this module
hosted in it (leases, pulls, pushes, modes, faults, metrics are the runtime's), so the module sees
only ``torch`` objects. See README "Your own model" and docs/decisions/0013-your-own-model.md.

:class:`ModuleFile` is this contract as a :class:`typing.Protocol` (the four functions; a protocol
cannot state ``collate``, which is optional), for type checkers and editors: annotate with it
what loads a model file, or check a file with ``isinstance(module, ModuleFile)``. The package is
typed (``py.typed``); python/pyproject.toml makes it installable without the cluster.
"""
from syncopate.torch.data import Criteo, DataSpec, FashionMnist, ctr_numeric_inputs
from syncopate.torch.embedding import ShardedEmbedding
from syncopate.torch.module_file import ModuleFile

__all__ = ["Criteo", "DataSpec", "FashionMnist", "ModuleFile", "ShardedEmbedding",
           "ctr_numeric_inputs"]
