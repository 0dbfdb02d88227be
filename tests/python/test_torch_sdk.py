"""syncopate.torch's Python side on its own (no cluster): ShardedEmbedding's lookups and errors,
and the Host the C++ worker runtime drives, on tests/unit/pytorch/testdata/tiny_model.py."""
import importlib.util
import os
import tempfile
import unittest

import numpy as np
import torch

import syncopate.torch as st
from syncopate.torch._host import REQUIRED, Host, load_user_module

TINY = os.path.join(os.path.dirname(__file__), "..", "unit", "pytorch", "testdata",
                    "tiny_model.py")
DATA = {"kind": "KIND_UNSPECIFIED", "train_limit": 0, "test_limit": 0}


def rows_for(embedding, keys, values):
    embedding.slot = st.embedding.TableRows()
    embedding.slot.keys = torch.tensor(keys, dtype=torch.int64)
    embedding.slot.rows = values


class ShardedEmbeddingTest(unittest.TestCase):
    def test_looks_up_the_pulled_rows_like_nn_embedding(self):
        e = st.ShardedEmbedding("t", 2, features="ids")
        rows = torch.arange(6, dtype=torch.float32).view(3, 2)
        rows_for(e, [-7, 3, 9], rows)
        ids = torch.tensor([[9, -7], [3, 3]])
        expected = torch.nn.functional.embedding(torch.tensor([[2, 0], [1, 1]]), rows)
        self.assertTrue(torch.equal(e(ids), expected))

    def test_pools_like_embedding_bag(self):
        e = st.ShardedEmbedding("t", 2, features="ids", pooling="mean")
        rows = torch.arange(6, dtype=torch.float32).view(3, 2)
        rows_for(e, [1, 2, 3], rows)
        out = e(torch.tensor([[1, 3], [2, 2]]))
        self.assertTrue(torch.equal(out, torch.tensor([[2.0, 3.0], [2.0, 3.0]])))

    def test_ids_that_were_not_pulled_are_an_error(self):
        e = st.ShardedEmbedding("t", 2, features="ids")
        rows_for(e, [1, 2], torch.zeros(2, 2))
        with self.assertRaisesRegex(ValueError, "not in the batch's ids"):
            e(torch.tensor([1, 5]))

    def test_outside_a_worker_it_says_where_it_runs(self):
        with self.assertRaisesRegex(RuntimeError, "inside a Syncopate worker"):
            st.ShardedEmbedding("t", 2, features="ids")(torch.tensor([1]))

    def test_bad_arguments_are_one_line_each(self):
        with self.assertRaisesRegex(ValueError, "dim must be positive"):
            st.ShardedEmbedding("t", 0, features="ids")
        with self.assertRaisesRegex(ValueError, "pooling"):
            st.ShardedEmbedding("t", 2, features="ids", pooling="max")


BN_MODEL = """
import torch


class Data(torch.utils.data.Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(n)
        self.x = torch.randn(n, 4, generator=g)
        self.y = torch.randint(0, 3, (n,), generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.bn = torch.nn.BatchNorm1d(3)

    def forward(self, x):
        return self.bn(self.fc(x))


def model():
    return Net()


def train_dataset(data):
    return Data(16)


def test_dataset(data):
    return Data(8)


loss = torch.nn.functional.cross_entropy
"""


class HostTest(unittest.TestCase):
    def test_layout_and_initial_values_are_the_modules(self):
        host = Host(TINY, 7, DATA, "describe")
        dense, tables = host.layout()
        self.assertEqual([d.name for d in dense],
                         ["fc.weight", "fc.bias", "out.weight", "out.bias"])
        self.assertFalse(any(d.buffer for d in dense))
        self.assertEqual(tables, [("ids", 4, 0.05)])
        torch.manual_seed(7)
        module = load_user_module(TINY).model()
        self.assertTrue(np.array_equal(host.initial_values()[:35],
                                       module.fc.weight.detach().reshape(-1).numpy()))
        self.assertEqual(host.check(), "classification")
        self.assertEqual(host.train_size(), 40)

    def test_keys_are_the_batchs_distinct_ids_sorted_as_int64(self):
        host = Host(TINY, 7, DATA, "train")
        keys = host.prepare(np.array([0, 1, 2], dtype=np.int64))
        ids = torch.cat([host.train_data[i][0]["ids"] for i in range(3)])
        self.assertEqual(len(keys), 1)
        self.assertEqual(keys[0].dtype, np.uint64)
        self.assertTrue(np.array_equal(keys[0].view(np.int64), torch.unique(ids).numpy()))

    def test_a_step_writes_the_gradients_into_the_runtimes_buffers(self):
        host = Host(TINY, 7, DATA, "train")
        keys = host.prepare(np.array([3, 4], dtype=np.int64))
        params = host.initial_values().copy()
        rows = np.full(len(keys[0]) * 4, 0.01, dtype=np.float32)
        grad = np.zeros_like(params)
        row_grad = np.zeros_like(rows)
        loss = host.train_step(params, [rows], grad, [row_grad])
        self.assertGreater(loss, 0)
        self.assertTrue(np.any(grad != 0))
        self.assertTrue(np.any(row_grad != 0))
        # The parameters are views of the runtime's buffer: a new pull is seen without a copy.
        params *= 0
        self.assertEqual(float(host.model.fc.weight.abs().sum()), 0.0)

    def test_scores_are_a_record_the_runtime_reads_by_name(self):
        host = Host(TINY, 7, DATA, "evaluate")
        keys = host.prepare_eval(0, 4)
        params = host.initial_values().copy()
        rows = np.full(len(keys[0]) * 4, 0.01, dtype=np.float32)
        scored = host.score(params, [rows])
        # libs/pytorch/torch_model.cc reads these attributes, not positions.
        self.assertEqual(scored._fields, ("loss_sum", "correct", "examples", "probabilities",
                                          "labels", "classes"))
        self.assertEqual((scored.examples, scored.classes), (4, 3))
        self.assertEqual(scored.probabilities.shape, (4, 3))
        self.assertEqual(scored.labels.dtype, np.int32)
        self.assertGreater(scored.loss_sum, 0)

    def test_buffers_follow_the_parameters_and_a_step_pushes_their_change(self):
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "bn_model.py")
            with open(path, "w") as f:
                f.write(BN_MODEL)
            host = Host(path, 3, DATA, "train")
            dense, _ = host.layout()
            self.assertEqual([(d.name, d.buffer, d.dtype) for d in dense],
                             [("fc.weight", False, "float32"), ("fc.bias", False, "float32"),
                              ("bn.weight", False, "float32"), ("bn.bias", False, "float32"),
                              ("bn.running_mean", True, "float32"),
                              ("bn.running_var", True, "float32"),
                              ("bn.num_batches_tracked", True, "int64")])
            self.assertEqual(host.num_parameters, 12 + 3 + 3 + 3 + 3 + 3 + 1)
            params = host.initial_values().copy()
            # The buffers as the module built them: running_var 1, the counter 0.
            self.assertTrue(np.array_equal(params[24:27], np.ones(3, dtype=np.float32)))
            self.assertEqual(params[27], 0.0)
            params[21:24] = 0.5  # a running mean the shards hold
            host.prepare(np.arange(8, dtype=np.int64))
            grad = np.zeros_like(params)
            host.train_step(params, [], grad, [])
            # The step's change to each buffer, against what was pulled: BatchNorm's update
            # (1 - 0.1) * 0.5 + 0.1 * batch mean, and one more batch counted.
            batch = host._batch[0]
            with torch.no_grad():
                pre = torch.nn.functional.linear(batch, host.model.fc.weight, host.model.fc.bias)
            expected = 0.9 * 0.5 + 0.1 * pre.mean(0)
            self.assertTrue(torch.allclose(torch.from_numpy(params[21:24] + grad[21:24]),
                                           expected, atol=1e-6))
            self.assertEqual(grad[27], 1.0)
            # The evaluator's module reads the buffers it is given.
            evaluator = Host(path, 3, DATA, "evaluate")
            evaluator.prepare_eval(0, 4)
            evaluator.score(params, [])
            self.assertTrue(torch.equal(evaluator.model.bn.running_mean,
                                        torch.full((3,), 0.5)))
            self.assertEqual(evaluator.model.bn.num_batches_tracked.dtype, torch.int64)

    def test_dropout_differs_across_batches_and_repeats_for_the_same_batch(self):
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "dropout_model.py")
            with open(path, "w") as f:
                f.write(BN_MODEL.replace(
                    "return self.bn(self.fc(x))",
                    "self.mask = torch.nn.functional.dropout(torch.ones(x.shape[0], 3), 0.5)\n"
                    "        return self.fc(x) * self.mask"))

            def mask(host, examples):
                host.prepare(np.array(examples, dtype=np.int64))
                params = host.initial_values().copy()
                host.train_step(params, [], np.zeros_like(params), [])
                return host.model.mask.clone()

            # Two workers (two hosts, as two processes build them) given the same batch draw the
            # same dropout mask; given their own batches, different ones (with a job seed given to
            # every worker, they would all draw the same masks).
            a, b = Host(path, 3, DATA, "train"), Host(path, 3, DATA, "train")
            self.assertTrue(torch.equal(mask(a, [0, 1, 2, 3]), mask(b, [0, 1, 2, 3])))
            self.assertFalse(torch.equal(mask(a, [0, 1, 2, 3]), mask(b, [4, 5, 6, 7])))
            # The mask is the batch's, not the worker's history: a worker that ran another batch
            # first still draws the same mask for this one.
            mask(a, [8, 9, 10, 11])
            self.assertTrue(torch.equal(mask(a, [4, 5, 6, 7]), mask(b, [4, 5, 6, 7])))

    def test_a_module_without_the_four_names_is_refused(self):
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "no_loss_model.py")
            with open(path, "w") as f:
                f.write("def model(): pass\ndef train_dataset(d): pass\n"
                        "def test_dataset(d): pass\n")
            with self.assertRaisesRegex(AttributeError, "defines no loss"):
                load_user_module(path)
            self.assertFalse(isinstance(_import(path), st.ModuleFile))

    def test_a_model_file_is_a_module_file(self):
        self.assertIsInstance(load_user_module(TINY), st.ModuleFile)
        # The names the runtime requires are the protocol's members.
        self.assertEqual(sorted(REQUIRED),
                         sorted(n for n in vars(st.ModuleFile) if not n.startswith("_")))


def _import(path):
    spec = importlib.util.spec_from_file_location("syncopate_test_module_file", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    unittest.main()
