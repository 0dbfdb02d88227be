"""How each conformance model is trained: one table for the cluster's job (run.py) and the plain
PyTorch loop (plain.py), so the two cannot drift apart.

A recipe is the job's optimizer, schedule, global batch, epochs and data sizes, and two bounds
derived from the seed-to-seed spread measured on 2026-12-02 (5 seeds each of the cluster, 4
workers and 2 shards in sync, and of plain PyTorch; docs/measurements/pytorch-conformance.md):

- ``floor``, the quick check's (run.py --check: one cluster run must reach it): plain PyTorch's
  mean minus 4 standard deviations of a single run (the larger of the two sides'), rounded down
  to 0.01. Were the spread normal, a correct cluster would fall below it about once in 30,000
  runs; a model that does not train, or trains something else (a broken tie, buffers that never
  move, a wrong batch), lands far below.
- ``tolerance``, the comparison's (run.py --seeds=5: |cluster mean - plain mean| must not
  exceed it): 3 standard errors of the difference of two 5-seed means, rounded up to 0.005.
"""
import dataclasses
import os
from typing import Dict

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclasses.dataclass(frozen=True)
class Recipe:
    model: str                # a file of tests/conformance/models/, without ".py"
    optimizer: str            # SGD | MOMENTUM | ADAGRAD | ADAM (OptimizerSpec.Kind)
    learning_rate: float
    epochs: int
    global_batch: int
    train_limit: int = 0      # DatasetSpec.train_limit (0: the module's own size)
    test_limit: int = 0
    momentum: float = 0.0
    nesterov: bool = False
    decay: str = "CONSTANT"   # CONSTANT | COSINE (LearningRateSchedule.Decay)
    warmup_fraction: float = 0.0
    metric: str = "ACCURACY"  # ACCURACY | AUC (TorchModel.Metric)
    data_dir: str = ""        # DatasetSpec.dir (Fashion-MNIST's models)
    floor: float = 0.0        # run.py --check: the final metric one cluster run must reach
    tolerance: float = 0.0    # run.py --seeds: how far the cluster's mean may trail plain's


def _fashion(**kw) -> Recipe:
    # The default job's recipe (examples/torch/mlp.textproto): Nesterov 0.05, cosine, 5% warmup.
    return Recipe(model="cnn_batchnorm", optimizer="MOMENTUM", learning_rate=0.05, momentum=0.9,
                  nesterov=True, decay="COSINE", warmup_fraction=0.05, global_batch=256,
                  data_dir="/usr/share/datasets/fashion-mnist", **kw)


RECIPES: Dict[str, Recipe] = {
    "cnn_batchnorm": _fashion(epochs=3, train_limit=3000, test_limit=1000,
                              floor=0.76, tolerance=0.01),
    "lstm_classifier": Recipe(model="lstm_classifier", optimizer="ADAM", learning_rate=0.01,
                              epochs=4, global_batch=128, floor=0.90, tolerance=0.01),
    "transformer_encoder": Recipe(model="transformer_encoder", optimizer="ADAM",
                                  learning_rate=0.003, decay="COSINE", warmup_fraction=0.1,
                                  epochs=6, global_batch=128, floor=0.82, tolerance=0.025),
    "frozen": Recipe(model="frozen", optimizer="MOMENTUM", learning_rate=0.05, momentum=0.9,
                     epochs=5, global_batch=128, floor=0.78, tolerance=0.02),
    "sometimes_unused": Recipe(model="sometimes_unused", optimizer="MOMENTUM",
                               learning_rate=0.05, momentum=0.9, epochs=5, global_batch=128,
                               floor=0.80, tolerance=0.03),
    "two_tables": Recipe(model="two_tables", optimizer="ADAGRAD", learning_rate=0.3, epochs=8,
                         global_batch=128, metric="AUC", floor=0.78, tolerance=0.01),
    "dict_collate": Recipe(model="dict_collate", optimizer="SGD", learning_rate=0.5, epochs=5,
                           global_batch=128, floor=0.95, tolerance=0.015),
    # Issue 42 item 1: the BatchNorm CNN on all of Fashion-MNIST, the default job's recipe.
    "cnn_batchnorm_full": _fashion(epochs=3, tolerance=0.003),
}

# What the quick check (ctest) runs: every model once, on its small data.
QUICK = [name for name in RECIPES if name != "cnn_batchnorm_full"]


def module_path(recipe: Recipe) -> str:
    return os.path.join(HERE, "models", recipe.model + ".py")


def job_text(name: str, recipe: Recipe, seed: int, workers: int, shards: int,
             mode: str = "MODE_SYNC") -> str:
    """The job spec (text proto, protos/syncopate/v1/job.proto) that trains ``recipe``."""
    schedule = ""
    if recipe.decay != "CONSTANT" or recipe.warmup_fraction > 0:
        schedule = f"  schedule {{ decay: {recipe.decay} warmup_fraction: " \
                   f"{recipe.warmup_fraction} }}\n"
    momentum = ""
    if recipe.optimizer == "MOMENTUM":
        momentum = f"  momentum: {recipe.momentum}\n  nesterov: {str(recipe.nesterov).lower()}\n"
    dataset = "FASHION_MNIST" if recipe.data_dir else "KIND_UNSPECIFIED"
    return (f'job_id: "conformance-{name}"\n'
            f'model {{ kind: TORCH torch {{ module: "{module_path(recipe)}" '
            f'metric: {recipe.metric} }} }}\n'
            f'dataset {{ kind: {dataset} dir: "{recipe.data_dir}" '
            f'train_limit: {recipe.train_limit} test_limit: {recipe.test_limit} }}\n'
            f'optimizer {{\n  kind: {recipe.optimizer}\n  learning_rate: {recipe.learning_rate}\n'
            f'{momentum}{schedule}}}\n'
            f'global_batch: {recipe.global_batch}\nnum_workers: {workers}\n'
            f'num_shards: {shards}\nmode: {mode}\nstop {{ epochs: {recipe.epochs} }}\n'
            f'block_size: 500\nseed: {seed}\n')
