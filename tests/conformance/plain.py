#!/usr/bin/python3
"""The conformance suite's yardstick: a conformance model trained by plain PyTorch alone.

One process, one ``torch.optim`` optimizer over ``model.parameters()``, a ``DataLoader`` with
the module's ``collate`` as its ``collate_fn``, the global batch as the batch, the learning-rate
schedule Syncopate's shards follow (libs/optim/learning_rate_schedule.cc, resolved as
libs/job/job_spec.cc ResolveRunLength does), then the final test metric: what
``syncopate local`` reports for the same module, recipe and seed (tests/conformance/run.py).

A :class:`syncopate.torch.ShardedEmbedding` has no plain-PyTorch twin, so each is replaced by
:class:`PlainTable`: an ``nn.Parameter`` holding a row for every id the training and test sets
hold, initialised as the shards initialise a row (:func:`syncopate.keys.initial_rows`), looked up
with the same ``F.embedding`` / ``F.embedding_bag``. Its rows are dense, so an optimizer whose
state moves a row without a gradient (momentum, Adam) would train them otherwise than the shards'
lazy updates: tables are refused with those (SGD and Adagrad leave such rows alone, as the
shards do).

Usage: tests/conformance/plain.py --model=NAME [--seed=1] (recipes in recipes.py)
"""
import argparse
import math
import os
import sys
from typing import Dict, List, Optional, Tuple

# One thread, as a Syncopate worker runs (libs/pytorch/python_runtime.cc), before torch loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
sys.path.insert(0, HERE)

from syncopate import keys  # noqa: E402
from syncopate.metrics import auc  # noqa: E402
from syncopate.torch import DataSpec, ShardedEmbedding  # noqa: E402
from syncopate.torch._host import load_user_module  # noqa: E402
import recipes  # noqa: E402


# --- ShardedEmbedding's plain twin -----------------------------------------------------------
class PlainTable(torch.nn.Module):
    """A table as a plain ``nn.Parameter`` over known ids (sorted int64 ``ids``, one row each),
    looked up as ShardedEmbedding looks up its pulled rows."""

    def __init__(self, ids: torch.Tensor, weight: torch.nn.Parameter,
                 pooling: Optional[str]) -> None:
        super().__init__()
        self.ids = ids
        self.weight = weight  # shared by the modules of one table
        self.pooling = pooling

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        index = torch.searchsorted(self.ids, ids)
        if self.pooling is None:
            return F.embedding(index, self.weight)
        bags = index.reshape(-1, index.shape[-1])
        pooled = F.embedding_bag(bags, self.weight, mode=self.pooling)
        return pooled.reshape(*index.shape[:-1], self.weight.shape[1])


def table_initializer(table: ShardedEmbedding) -> keys.Initializer:
    """How a shard creates a row of a TORCH job's table (libs/job/torch_kind.cc)."""
    if table.init_scale > 0:
        return keys.Initializer("UNIFORM", scale=table.init_scale)
    return keys.Initializer("ZEROS")


def replace_tables(model: torch.nn.Module, ids: Dict[str, torch.Tensor],
                   rows: Dict[str, torch.Tensor]) -> Dict[str, torch.nn.Parameter]:
    """Swaps every ShardedEmbedding of ``model`` for a PlainTable over ``ids[table]`` (sorted)
    holding ``rows[table]``; the modules of one table share one Parameter, returned by name."""
    weights: Dict[str, torch.nn.Parameter] = {}
    for parent in list(model.modules()):
        for attribute, child in list(parent.named_children()):
            if not isinstance(child, ShardedEmbedding):
                continue
            if child.table not in weights:
                weights[child.table] = torch.nn.Parameter(rows[child.table].clone())
            setattr(parent, attribute,
                    PlainTable(ids[child.table], weights[child.table], child.pooling))
    return weights


def table_features(model: torch.nn.Module) -> Dict[str, List[str]]:
    """The features each table of ``model`` reads (its ShardedEmbeddings' together)."""
    features: Dict[str, List[str]] = {}
    for m in model.modules():
        if isinstance(m, ShardedEmbedding):
            names = features.setdefault(m.table, [])
            names += [f for f in m.features if f not in names]
    return features


def table_ids(features: Dict[str, List[str]], batches) -> Dict[str, torch.Tensor]:
    """Every id each table reads in ``batches`` ((input, target) pairs), sorted and distinct."""
    seen: Dict[str, List[torch.Tensor]] = {t: [] for t in features}
    for inputs, _ in batches:
        for table, names in features.items():
            seen[table] += [torch.as_tensor(inputs[f]).reshape(-1) for f in names]
    return {t: torch.unique(torch.cat(v)) for t, v in seen.items()}


def initial_rows(model: torch.nn.Module, ids: Dict[str, torch.Tensor],
                 seed: int) -> Dict[str, torch.Tensor]:
    """The rows the shards would create for ``ids`` under the job's ``seed``."""
    tables = {m.table: m for m in model.modules() if isinstance(m, ShardedEmbedding)}
    return {name: torch.from_numpy(keys.initial_rows(
        table_initializer(tables[name]), seed, name, ids[name].numpy().view(np.uint64),
        tables[name].dim)) for name in ids}


# --- the recipe --------------------------------------------------------------------------------
def run_length(recipe: recipes.Recipe, train_examples: int) -> Tuple[int, int]:
    """(updates, warmup updates) as the coordinator resolves them: ceil(epochs x N / G) and
    round(warmup_fraction x updates)."""
    run = -(-recipe.epochs * train_examples // recipe.global_batch)
    return run, int(math.floor(recipe.warmup_fraction * run + 0.5))


def learning_rate(recipe: recipes.Recipe, update: int, run: int, warmup: int) -> float:
    """LearningRateSchedule::At(update) (float32 there; torch casts it to float32 too)."""
    peak = float(np.float32(recipe.learning_rate))
    if update < warmup:
        return peak * (update + 1) / (warmup + 1)
    if recipe.decay != "COSINE":
        return peak
    total = max(run, warmup + 1)
    t = min((update - warmup) / (total - warmup), 1.0)
    return peak * (1 + math.cos(math.pi * t)) / 2


def optimizer_for(recipe: recipes.Recipe, parameters) -> torch.optim.Optimizer:
    """torch.optim with the shards' defaults where torch's differ (libs/optim/update_rule.cc)."""
    lr = recipe.learning_rate
    if recipe.optimizer == "SGD":
        return torch.optim.SGD(parameters, lr=lr)
    if recipe.optimizer == "MOMENTUM":
        return torch.optim.SGD(parameters, lr=lr, momentum=recipe.momentum,
                               nesterov=recipe.nesterov)
    if recipe.optimizer == "ADAGRAD":
        return torch.optim.Adagrad(parameters, lr=lr, initial_accumulator_value=0.1, eps=1e-7)
    if recipe.optimizer == "ADAM":
        return torch.optim.Adam(parameters, lr=lr, betas=(0.9, 0.999), eps=1e-8)
    raise ValueError(f"unknown optimizer {recipe.optimizer}")


# --- training and the metric (syncopate.metrics.auc) ---------------------------------------------


def evaluate(model: torch.nn.Module, loader) -> float:
    """Accuracy of an N x C classifier, or the AUC of one logit per example (the runtime's
    choice, python/syncopate/torch/_host.py Host.score)."""
    model.eval()
    outputs, targets = [], []
    with torch.no_grad():
        for inputs, target in loader:
            outputs.append(model(inputs))
            targets.append(target)
    output, target = torch.cat(outputs), torch.cat(targets)
    if output.dim() == 2 and output.shape[1] > 1:
        return float((output.argmax(dim=1) == target).float().mean())
    return auc(torch.sigmoid(output.reshape(-1)).numpy(), target.reshape(-1).numpy())


def fetch(dataset, indices: List[int], collate_fn):
    """One batch as torch's DataLoader fetches it (torch/utils/data/_utils/fetch.py): the
    dataset's ``__getitems__`` if it has one, else one ``dataset[i]`` per index, then
    ``collate_fn``. (A DataLoader's iterator also draws its base seed from torch's generator when
    it is created; fetching directly keeps the generator where the batch's seed put it.)"""
    getitems = getattr(dataset, "__getitems__", None)
    examples = getitems(indices) if getitems is not None else [dataset[i] for i in indices]
    return collate_fn(examples)


def collate_for(user):
    """The DataLoader's ``collate_fn``: the module's ``collate``, else torch's default collate of
    a list of examples. Syncopate's datasets (FashionMnist, Criteo) return a whole batch from
    ``__getitems__``, which torch's DataLoader (1.13 and 2.x) hands to ``collate_fn`` as it is:
    such a batch passes through unchanged, as in a worker (syncopate.torch.data.collate)."""
    if getattr(user, "collate", None) is not None:
        return user.collate

    def default(examples):
        if isinstance(examples, list):
            return torch.utils.data.default_collate(examples)
        return examples
    return default


def train(recipe: recipes.Recipe, seed: int) -> float:
    user = load_user_module(recipes.module_path(recipe))
    collate_fn = collate_for(user)
    spec = DataSpec(dir=recipe.data_dir, train_limit=recipe.train_limit,
                    test_limit=recipe.test_limit)
    torch.manual_seed(seed)
    model = user.model()
    train_set = user.train_dataset(spec)
    test_set = user.test_dataset(spec)
    if recipe.test_limit:
        test_set = torch.utils.data.Subset(test_set, range(min(len(test_set), recipe.test_limit)))
    test_loader = torch.utils.data.DataLoader(test_set, batch_size=1000, collate_fn=collate_fn)
    if any(isinstance(m, ShardedEmbedding) for m in model.modules()):
        if recipe.optimizer not in ("SGD", "ADAGRAD"):
            raise ValueError("plain.py's tables are dense: SGD or ADAGRAD only (see its doc)")
        scan = torch.utils.data.DataLoader(train_set, batch_size=1000, collate_fn=collate_fn)
        ids = table_ids(table_features(model), list(scan) + list(test_loader))
        replace_tables(model, ids, initial_rows(model, ids, seed))
    optimizer = optimizer_for(recipe, model.parameters())
    run, warmup = run_length(recipe, len(train_set))
    generator = torch.Generator().manual_seed(seed)
    order = torch.cat([torch.randperm(len(train_set), generator=generator)
                       for _ in range(recipe.epochs)]).tolist()
    batches = torch.utils.data.BatchSampler(order, recipe.global_batch, drop_last=False)
    loader = torch.utils.data.DataLoader(train_set, batch_sampler=batches, collate_fn=collate_fn)
    model.train()
    for update, (inputs, target) in enumerate(loader):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(recipe, update, run, warmup)
        optimizer.zero_grad()  # torch 1.13's default: set_to_none=False (README "Your own model")
        user.loss(model(inputs), target).backward()
        optimizer.step()
    assert update + 1 == run, (update + 1, run)
    return evaluate(model, test_loader)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, choices=sorted(recipes.RECIPES))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    recipe = recipes.RECIPES[args.model]
    torch.set_num_threads(1)
    metric = train(recipe, args.seed)
    print(f"plain {args.model} seed={args.seed}: final test {recipe.metric.lower()} {metric:.6f}")


if __name__ == "__main__":
    main()
