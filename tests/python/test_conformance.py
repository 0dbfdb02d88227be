"""The conformance suite's step parity and refusals (issue 42 item 3), without processes.

For every model of tests/conformance/models, one training step of one worker and one shard,
driven exactly as the C++ runtime drives it (libs/pytorch/torch_model.cc: the coordinator's
describe, then a worker's prepare, pull, train_step and push; libs/shard/shard_core.cc's update),
equals plain PyTorch's step on the same batch with the same seed, bit for bit (torch.equal): the
loss, every gradient, the updated parameters, buffers and embedding rows.

The shard is emulated here in numpy with the shard's own float32 arithmetic:
- the mean gradient of a version is ``(n * g) / n`` (GlobalBatchAggregator: the buffer holds
  sample-weighted sums, TakeUpdate divides by the samples). With one worker that is g exactly
  when n is a power of two; for other n it may differ from g by an ulp, so one worker's step at a
  batch of, say, 48 can differ from plain PyTorch's in the last bit of a few parameters. The
  batch here is 64.
- SGD is ``p = fma(mean, -lr, p)``, one rounding (update_kernels.cc at the v3 and v4 levels,
  which is what torch's ``p.add_(g, alpha=-lr)`` computes; the baseline level rounds twice).
- a buffer's entries take no optimizer step; the pushed change is added (ADR 0018).
"""
import os
import sys
import tempfile
import textwrap
import unittest
import warnings
from typing import Dict, List, Tuple

import numpy as np
import torch

from syncopate import keys
from syncopate.torch import DataSpec
from syncopate.torch._host import Host, _seed_everything, batch_seed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "conformance"))
import plain  # noqa: E402
import recipes  # noqa: E402

SEED = 5
BATCH = 64  # a power of two: see the module's docstring
LR = 0.05


def fma32(a: np.ndarray, b: np.float32, c: np.ndarray) -> np.ndarray:
    """``a * b + c`` in float32 rounded once, as std::fma: the product of two floats is exact in
    float64; the float64 sum is made round-to-odd (TwoSum's error decides the last bit), which
    then rounds to float32 correctly (Boldo & Melquiond 2008: 53 >= 24 + 2)."""
    product = a.astype(np.float64) * np.float64(b)
    addend = c.astype(np.float64)
    total = product + addend
    back = total - product
    error = (product - (total - back)) + (addend - back)
    bits = total.view(np.int64).copy()
    inexact_even = (error != 0) & ((bits & 1) == 0)
    away = np.sign(error) == np.sign(total)
    bits[inexact_even & away] += 1
    bits[inexact_even & ~away] -= 1
    return bits.view(np.float64).astype(np.float32)


class OneShard:
    """The only shard of a one-worker job: the flat vector the coordinator's describe gave it
    and rows created on first touch (syncopate.keys.initial_rows: the shards' initializer)."""

    def __init__(self, described: Host, seed: int) -> None:
        layout = described.layout()
        self.params = described.initial_values().copy()
        self.buffers: List[Tuple[int, int]] = []
        offset = 0
        for tensor in layout.dense:
            size = int(np.prod(tensor.shape, dtype=np.int64))
            if tensor.buffer:
                self.buffers.append((offset, size))
            offset += size
        self.tables = layout.tables
        self.seed = seed
        self.rows: List[Dict[int, np.ndarray]] = [{} for _ in self.tables]

    def pull_rows(self, t: int, wanted: np.ndarray) -> np.ndarray:
        table = self.tables[t]
        init = (keys.Initializer("UNIFORM", scale=table.init_scale) if table.init_scale > 0
                else keys.Initializer("ZEROS"))
        fresh = keys.initial_rows(init, self.seed, table.name, wanted, table.dim)
        return np.stack([self.rows[t].get(int(k), fresh[i]) for i, k in enumerate(wanted)])

    def push(self, grad: np.ndarray, pulled_keys: List[np.ndarray],
             row_grads: List[np.ndarray], samples: int, lr: float) -> None:
        scale = np.float32(samples)  # weight 1 (fresh) x samples
        mean = (scale * grad) / scale
        changes = [mean[o:o + n].copy() for o, n in self.buffers]
        for o, n in self.buffers:
            mean[o:o + n] = 0
        self.params = fma32(mean, -np.float32(lr), self.params)
        for (o, n), change in zip(self.buffers, changes):
            self.params[o:o + n] += change
        for t, table in enumerate(self.tables):
            rows = self.pull_rows(t, pulled_keys[t])
            mean_rows = (scale * row_grads[t].reshape(-1, table.dim)) / scale
            updated = fma32(mean_rows, -np.float32(lr), rows)
            for i, k in enumerate(pulled_keys[t]):
                self.rows[t][int(k)] = updated[i]


class Step:
    """One step's results on one side, by tensor name (tables: by table name, the rows of the
    batch's keys in ascending order)."""

    def __init__(self) -> None:
        self.loss = 0.0
        self.grads: Dict[str, torch.Tensor] = {}
        self.after: Dict[str, torch.Tensor] = {}
        self.row_grads: Dict[str, torch.Tensor] = {}
        self.rows_after: Dict[str, torch.Tensor] = {}


class OneWorkerCluster:
    """What the cluster computes: the coordinator's describe (layout, initial values, the check
    step, in DescribeTorchModel's order), then a worker's steps against one shard."""

    def __init__(self, path: str, data: dict) -> None:
        described = Host(path, SEED, data, "describe")
        self.layout = described.layout()
        self.shard = OneShard(described, SEED)
        described.train_size()
        described.check()
        self.worker = Host(path, SEED, data, "train")

    def step(self, examples: np.ndarray) -> Step:
        pulled_keys = self.worker.prepare(examples)
        params = self.shard.params.copy()
        rows = [self.shard.pull_rows(t, k).reshape(-1) for t, k in enumerate(pulled_keys)]
        grad = np.zeros_like(params)
        row_grads = [np.zeros_like(r) for r in rows]
        step = Step()
        step.loss = self.worker.train_step(params, rows, grad, row_grads)
        self.shard.push(grad, pulled_keys, row_grads, len(examples), LR)
        offset = 0
        for tensor in self.layout.dense:
            size = int(np.prod(tensor.shape, dtype=np.int64))
            shape = tuple(tensor.shape)
            if not tensor.buffer:
                step.grads[tensor.name] = torch.from_numpy(
                    grad[offset:offset + size].copy()).view(shape)
            step.after[tensor.name] = torch.from_numpy(
                self.shard.params[offset:offset + size].copy()).view(shape)
            offset += size
        for t, table in enumerate(self.layout.tables):
            step.row_grads[table.name] = torch.from_numpy(row_grads[t]).view(-1, table.dim)
            step.rows_after[table.name] = torch.from_numpy(
                self.shard.pull_rows(t, pulled_keys[t]))
        return step


class PlainTraining:
    """Plain PyTorch: the module built under the job's seed, each batch fetched as a DataLoader
    fetches it under the batch's seed (what a worker seeds), torch.optim.SGD. ShardedEmbedding
    is replaced by plain.PlainTable: a Parameter holding, for every id the given batches read,
    the row a shard would create."""

    def __init__(self, path: str, data: dict, batches: List[np.ndarray]) -> None:
        self.user = plain.load_user_module(path)
        torch.manual_seed(SEED)
        self.model = self.user.model()
        self.dataset = self.user.train_dataset(DataSpec(**data))
        self.collate_fn = plain.collate_for(self.user)
        self.ids: Dict[str, torch.Tensor] = {}
        self.tables: Dict[str, torch.nn.Parameter] = {}
        self.features = plain.table_features(self.model)
        if self.features:
            read = [plain.fetch(self.dataset, b.tolist(), self.collate_fn) for b in batches]
            self.ids = plain.table_ids(self.features, read)
            self.tables = plain.replace_tables(self.model, self.ids,
                                               plain.initial_rows(self.model, self.ids, SEED))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=LR)
        self.named = {name: p for name, p in self.model.named_parameters()
                      if not any(p is w for w in self.tables.values())}

    def step(self, examples: np.ndarray) -> Step:
        _seed_everything(batch_seed(SEED, examples))
        inputs, target = plain.fetch(self.dataset, examples.tolist(), self.collate_fn)
        self.optimizer.zero_grad(set_to_none=True)
        self.model.train()
        loss = self.user.loss(self.model(inputs), target)
        loss.backward()
        step = Step()
        step.loss = float(loss)
        for name, p in self.named.items():
            step.grads[name] = torch.zeros_like(p) if p.grad is None else p.grad.clone()
        batch_rows = {}
        if self.tables:
            batch_ids = plain.table_ids(self.features, [(inputs, target)])
            for table, weight in self.tables.items():
                batch_rows[table] = torch.searchsorted(self.ids[table], batch_ids[table])
                step.row_grads[table] = weight.grad[batch_rows[table]].clone()
        self.optimizer.step()
        for name, p in self.named.items():
            step.after[name] = p.detach().clone()
        for name, b in self.model.named_buffers():
            step.after[name] = b.clone()
        for table, weight in self.tables.items():
            step.rows_after[table] = weight.detach()[batch_rows[table]].clone()
        return step


class StepParityTest(unittest.TestCase):
    """One worker, one shard, one step: bit for bit plain PyTorch's, model by model."""

    def check_model(self, name: str, offset: int = 0, steps: int = 1) -> Tuple[Step, Step]:
        """``steps`` steps on consecutive batches from example ``offset``; every one equal."""
        recipe = recipes.RECIPES[name]
        path = recipes.module_path(recipe)
        data = {"dir": recipe.data_dir, "train_limit": recipe.train_limit,
                "test_limit": recipe.test_limit}
        batches = [np.arange(offset + k * BATCH, offset + (k + 1) * BATCH, dtype=np.int64)
                   for k in range(steps)]
        cluster = OneWorkerCluster(path, data)
        reference = PlainTraining(path, data, batches)
        buffers = {d.name for d in cluster.worker.buffers}
        for k, examples in enumerate(batches):
            ours, theirs = cluster.step(examples), reference.step(examples)
            self.assert_equal_steps(f"{name}, step {k + 1}", buffers, ours, theirs,
                                    buffer_ulps=0 if k == 0 else 1)
        return ours, theirs

    def assert_equal_steps(self, what: str, buffers, ours: Step, theirs: Step,
                           buffer_ulps: int = 0) -> None:
        self.assertEqual(ours.loss, theirs.loss, f"{what}: the loss")
        self.assertEqual(sorted(ours.grads), sorted(theirs.grads), f"{what}: the parameters")
        for tensor, grad in theirs.grads.items():
            self.assertTrue(torch.equal(ours.grads[tensor], grad), f"{what}: {tensor}'s gradient")
        self.assertEqual(sorted(ours.after), sorted(theirs.after))
        for tensor, value in theirs.after.items():
            if tensor in buffers and buffer_ulps > 0:
                # After the first step the shard's pulled + fl(after - pulled) is after exactly
                # only while the subtraction is exact (Sterbenz); otherwise within an ulp of the
                # larger of the two. Running statistics do not enter training's forward, so the
                # parameters stay bit-identical regardless (checked below).
                ours_value, plain_value = ours.after[tensor].double(), value.double()
                bound = torch.maximum(ours_value.abs(), plain_value.abs()) * 2.0 ** -23
                self.assertTrue(bool(((ours_value - plain_value).abs() <= buffer_ulps * bound).all()),
                                f"{what}: buffer {tensor} after the step, within {buffer_ulps} ulp")
            elif tensor in buffers:
                # Held as float32 on the shard, cast to the module's dtype in the module.
                self.assertTrue(torch.equal(ours.after[tensor].to(value.dtype), value),
                                f"{what}: buffer {tensor} after the step")
                self.assertTrue(torch.equal(ours.after[tensor], value.to(torch.float32)),
                                f"{what}: buffer {tensor} as the shard holds it")
            else:
                self.assertTrue(torch.equal(ours.after[tensor], value),
                                f"{what}: parameter {tensor} after the step")
        self.assertEqual(sorted(ours.row_grads), sorted(theirs.row_grads))
        for table in theirs.row_grads:
            self.assertTrue(torch.equal(ours.row_grads[table], theirs.row_grads[table]),
                            f"{what}: table {table}'s row gradients")
            self.assertTrue(torch.equal(ours.rows_after[table], theirs.rows_after[table]),
                            f"{what}: table {table}'s rows after the step")

    def test_cnn_with_batchnorm(self):
        ours, _ = self.check_model("cnn_batchnorm")
        # The running statistics moved, and the counter counted the batch.
        self.assertFalse(torch.equal(ours.after["bn1.running_mean"], torch.zeros(16)))
        self.assertEqual(float(ours.after["bn1.num_batches_tracked"]), 1.0)

    def test_lstm_classifier(self):
        self.check_model("lstm_classifier")

    def test_transformer_encoder_with_tied_embeddings_and_a_buffer(self):
        ours, _ = self.check_model("transformer_encoder")
        # Tied: one parameter, listed once, its gradient the sum of both uses.
        self.assertIn("embed.weight", ours.grads)
        self.assertNotIn("out.weight", ours.grads)
        # The registered buffer is held, and no step changes it.
        module = plain.load_user_module(recipes.module_path(recipes.RECIPES["transformer_encoder"]))
        self.assertTrue(torch.equal(ours.after["positions"], module.sinusoids(12, 32)))

    def test_frozen_parameters(self):
        ours, theirs = self.check_model("frozen")
        module = plain.load_user_module(recipes.module_path(recipes.RECIPES["frozen"]))
        built = module.model()
        for name, p in built.backbone.named_parameters():
            self.assertTrue(torch.equal(ours.after["backbone." + name], p.detach()), name)
            self.assertEqual(float(ours.grads["backbone." + name].abs().sum()), 0.0)
        for name, b in built.backbone.named_buffers():
            self.assertTrue(torch.equal(ours.after["backbone." + name], b.float()), name)

    def test_parameters_without_a_gradient_in_a_step(self):
        # A batch whose seed makes LayerDrop skip a block (found by trying lease-sized offsets;
        # the draw is the batch's, so it is the same batch on every run).
        for offset in range(0, 40 * BATCH, BATCH):
            ours, theirs = self.check_model("sometimes_unused", offset)
            skipped = [n for n in theirs.grads if n.startswith("blocks.")
                       and float(theirs.grads[n].abs().sum()) == 0.0]
            if skipped:
                break
        self.assertTrue(skipped, "no batch skipped a block")
        for n in skipped + ["auxiliary.weight", "auxiliary.bias"]:
            self.assertEqual(float(ours.grads[n].abs().sum()), 0.0, n)

    def test_two_sharded_tables_beside_a_dense_tower(self):
        ours, _ = self.check_model("two_tables")
        self.assertEqual(sorted(ours.row_grads), ["items", "users"])

    def test_steps_stay_bit_identical(self):
        # Twenty steps of the CNN: parameters bit for bit at every step, the running statistics
        # within an ulp (the shard's pulled + (after - pulled)); five of the two-table model:
        # rows the shard created and updated are pulled again.
        self.check_model("cnn_batchnorm", steps=20)
        self.check_model("two_tables", steps=5)

    def test_dataset_of_dicts_with_a_custom_collate(self):
        self.check_model("dict_collate")


REFUSED_BASE = """
import torch
import torch.nn.functional as F


class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.full((4,), float(i)), torch.tensor(i % 3)


def train_dataset(data):
    return Data()


def test_dataset(data):
    return Data()


loss = F.cross_entropy
"""


class RefusalTest(unittest.TestCase):
    """What the shards cannot hold is refused when the coordinator describes the module, with one
    line naming the parameter or buffer and why (the traceback's last line is the job's
    reason)."""

    def refusal(self, model_source: str, extra: str = "") -> str:
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "refused_model.py")
            with open(path, "w") as f:
                f.write(REFUSED_BASE + textwrap.dedent(model_source) + textwrap.dedent(extra))
            with self.assertRaises((TypeError, ValueError)) as caught, \
                    warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch's "Lazy modules are a new feature"
                host = Host(path, 1, {}, "describe")
                host.layout()
                host.initial_values()
                host.check()
        message = str(caught.exception)
        self.assertNotIn("\n", message)
        return message

    def test_a_float64_parameter(self):
        message = self.refusal("""
            def model():
                return torch.nn.Sequential(torch.nn.Linear(4, 3).double(), torch.nn.Identity())
            """)
        self.assertIn("parameter 0.weight is torch.float64", message)

    def test_a_complex_buffer(self):
        message = self.refusal("""
            class Net(torch.nn.Linear):
                def __init__(self):
                    super().__init__(4, 3)
                    self.register_buffer("phase", torch.zeros(3, dtype=torch.complex64))

            def model():
                return Net()
            """)
        self.assertIn("buffer phase is torch.complex64", message)

    def test_an_integer_buffer_float32_cannot_hold(self):
        message = self.refusal("""
            class Net(torch.nn.Linear):
                def __init__(self):
                    super().__init__(4, 3)
                    self.register_buffer("salt", torch.tensor([7, 2**40 + 1]))

            def model():
                return Net()
            """)
        self.assertIn(f"buffer salt (torch.int64) holds {2**40 + 1}, which float32 cannot hold",
                      message)

    def test_an_embedding_with_sparse_gradients(self):
        message = self.refusal("""
            class Net(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.emb = torch.nn.Embedding(10, 3, sparse=True)

                def forward(self, x):
                    return self.emb(x.long()).sum(1)

            def model():
                return Net()
            """)
        self.assertIn("parameter emb.weight takes sparse gradients", message)

    def test_a_sparse_gradient_made_in_forward(self):
        message = self.refusal("""
            class Net(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.table = torch.nn.Parameter(torch.randn(10, 3))

                def forward(self, x):
                    return F.embedding(x.long(), self.table, sparse=True).sum(1)

            def model():
                return Net()
            """)
        self.assertIn("parameter table takes sparse gradients", message)

    def test_parameters_tied_through_their_storage(self):
        message = self.refusal("""
            class Net(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.a = torch.nn.Linear(4, 4)
                    self.b = torch.nn.Linear(4, 3)
                    self.b.weight.data = self.a.weight.data[:3]  # a tie the shards cannot keep

                def forward(self, x):
                    return self.b(self.a(x))

            def model():
                return Net()
            """)
        self.assertIn("parameter a.weight and parameter b.weight share memory", message)

    def test_a_lazy_module(self):
        message = self.refusal("""
            def model():
                return torch.nn.LazyLinear(3)
            """)
        self.assertIn("parameter weight is uninitialized", message)

    def test_a_collate_that_does_not_give_input_and_target(self):
        message = self.refusal("""
            def model():
                return torch.nn.Linear(4, 3)
            """, """
            def collate(examples):
                return {"x": torch.stack([x for x, _ in examples])}
            """)
        self.assertIn("collate(examples) gave dict, not (input, target)", message)

    def test_tied_by_assigning_the_parameter_is_held_once(self):
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "tied_model.py")
            with open(path, "w") as f:
                f.write(REFUSED_BASE + textwrap.dedent("""
                    def model():
                        a, b = torch.nn.Linear(4, 4, bias=False), torch.nn.Linear(4, 4)
                        b.weight = a.weight
                        return torch.nn.Sequential(a, b, torch.nn.Linear(4, 3))
                    """))
            host = Host(path, 1, {}, "describe")
            self.assertEqual([d.name for d in host.layout().dense],
                             ["0.weight", "1.bias", "2.weight", "2.bias"])
            self.assertEqual(host.check(), "classification")


if __name__ == "__main__":
    unittest.main()
