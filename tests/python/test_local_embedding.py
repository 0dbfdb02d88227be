"""ShardedEmbedding's local mode: a whole table in memory, entered through load_state_dict, reading
what the cluster reads (a row, else the initializer's value or zeros), and invisible to the worker
runtime (no parameters, no buffers)."""
import io
import os
import unittest

import numpy as np
import torch

import syncopate.torch as st
from syncopate import keys
from syncopate.torch._host import Host
from syncopate.torch.embedding import LocalTable, TableRows

TINY = os.path.join(os.path.dirname(__file__), "..", "unit", "pytorch", "testdata",
                    "tiny_model.py")
UNIFORM = keys.Initializer("UNIFORM", scale=0.05)


def table(name, ids, dim, seed=7, absent="initial", init=UNIFORM):
    ids = torch.tensor(sorted(ids), dtype=torch.int64)
    rows = torch.arange(len(ids) * dim, dtype=torch.float32).view(len(ids), dim) + 1
    return LocalTable(name, ids, rows, init, seed, absent)


class Pair(torch.nn.Module):
    """Two modules of one table, and one of another."""

    def __init__(self):
        super().__init__()
        self.a = st.ShardedEmbedding("t", 3, features="ids")
        self.b = st.ShardedEmbedding("t", 3, features="ids", pooling="sum")
        self.c = st.ShardedEmbedding("u", 2, features="more", pooling="mean", init_scale=0.0)
        self.fc = torch.nn.Linear(2, 1)


class LookupTest(unittest.TestCase):
    def test_rows_it_holds_and_initial_values_for_the_others(self):
        e = st.ShardedEmbedding("t", 3, features="ids")
        e.use_local_table(table("t", [-9, 4, 1 << 40], 3))
        ids = torch.tensor([[4, 5], [-9, -2]])
        out = e(ids)
        self.assertEqual(out.shape, (2, 2, 3))
        self.assertEqual(out[0, 0].tolist(), [4.0, 5.0, 6.0])  # key 4 is the table's 2nd row
        self.assertEqual(out[1, 0].tolist(), [1.0, 2.0, 3.0])
        # Absent keys read as InitializeRow(UNIFORM(0.05), seed 7, "t", key); -2 is 2**64 - 2.
        expected = keys.initial_rows(UNIFORM, 7, "t", np.array([5, -2], dtype=np.int64), 3)
        self.assertTrue(np.array_equal(out[0, 1].numpy(), expected[0]))
        self.assertTrue(np.array_equal(out[1, 1].numpy(), expected[1]))

    def test_a_table_that_admits_reads_absent_keys_as_zeros(self):
        e = st.ShardedEmbedding("t", 2, features="ids")
        e.use_local_table(table("t", [1], 2, absent="zeros"))
        self.assertEqual(e(torch.tensor([1, 2])).tolist(), [[1.0, 2.0], [0.0, 0.0]])

    def test_pooling_is_the_embedding_bag_of_the_rows_read(self):
        local = table("t", [1, 2, 3], 2)
        rows = local.gather(torch.tensor([1, 2, 3, 8]))
        for mode in ("sum", "mean"):
            e = st.ShardedEmbedding("t", 2, features="ids", pooling=mode)
            e.use_local_table(local)
            ids = torch.tensor([[1, 8, 3], [2, 2, 8]])
            expected = torch.nn.functional.embedding_bag(torch.tensor([[0, 3, 2], [1, 1, 3]]),
                                                         rows, mode=mode)
            self.assertTrue(torch.equal(e(ids), expected), mode)

    def test_local_rows_take_no_gradient(self):
        e = st.ShardedEmbedding("t", 2, features="ids")
        e.use_local_table(table("t", [1], 2))
        with self.assertRaisesRegex(NotImplementedError, "local mode is for scoring"):
            e.requires_grad_(True)
        e.requires_grad_(False)  # freezing is fine
        e.local.rows.requires_grad_(True)
        with self.assertRaisesRegex(NotImplementedError, "its rows take no gradient"):
            e(torch.tensor([1]))

    def test_a_table_must_be_sorted_as_int64_and_fit_the_module(self):
        with self.assertRaisesRegex(ValueError, "ascending as int64"):
            LocalTable("t", torch.tensor([3, 1]), torch.zeros(2, 2), UNIFORM, 1)
        with self.assertRaisesRegex(ValueError, "cannot use table 'u' of dim 2"):
            st.ShardedEmbedding("t", 2, features="ids").use_local_table(table("u", [1], 2))

    def test_a_worker_slot_still_wins(self):
        e = st.ShardedEmbedding("t", 2, features="ids")
        e.use_local_table(table("t", [1], 2))
        e.slot = TableRows()
        e.slot.keys = torch.tensor([1])
        e.slot.rows = torch.tensor([[9.0, 9.0]])
        self.assertEqual(e(torch.tensor([1])).tolist(), [[9.0, 9.0]])


class StateDictTest(unittest.TestCase):
    def local_pair(self):
        m = Pair()
        shared = table("t", [-5, 2, 11], 3, seed=3)
        m.a.use_local_table(shared)
        m.b.use_local_table(shared)
        m.c.use_local_table(table("u", [4], 2, seed=3, init=keys.Initializer("ZEROS")))
        return m

    def round_trip(self, state):
        buffer = io.BytesIO()
        torch.save(state, buffer)
        buffer.seek(0)
        return torch.load(buffer)

    def test_load_state_dict_enters_local_mode_with_shared_rows(self):
        m = self.local_pair()
        state = m.state_dict()
        for name in ("a.keys", "a.weight", "a._extra_state", "b.keys", "c.weight"):
            self.assertIn(name, state)
        self.assertEqual(state["a._extra_state"]["seed"], 3)
        self.assertEqual(state["a._extra_state"]["initializer"],
                         '{"kind": "UNIFORM", "scale": 0.05}')
        fresh = Pair()
        result = fresh.load_state_dict(self.round_trip(state), strict=True)
        self.assertEqual((result.missing_keys, result.unexpected_keys), ([], []))
        # One file, one copy of a table's rows: the two modules share them.
        self.assertEqual(fresh.a.local.rows.data_ptr(), fresh.b.local.rows.data_ptr())
        ids = torch.tensor([[2, 40, -5]])
        self.assertTrue(torch.equal(fresh.a(ids), m.a(ids)))
        self.assertTrue(torch.equal(fresh.b(ids), m.b(ids)))
        self.assertTrue(torch.equal(fresh.c(torch.tensor([[4, 5]])), m.c(torch.tensor([[4, 5]]))))
        self.assertEqual(fresh.c(torch.tensor([[5, 6]])).tolist(), [[0.0, 0.0]])

    def test_strict_loading_names_what_is_missing_or_unexpected(self):
        state = self.local_pair().state_dict()
        del state["b.weight"]
        state["a.bogus"] = torch.zeros(1)
        with self.assertRaises(RuntimeError) as raised:
            Pair().load_state_dict(state, strict=True)
        message = str(raised.exception)
        self.assertIn('Missing key(s) in state_dict: "b.weight"', message)
        self.assertIn('Unexpected key(s) in state_dict: "a.bogus"', message)
        lenient = Pair()
        lenient.load_state_dict(state, strict=False)
        self.assertIsNotNone(lenient.a.local)
        self.assertIsNone(lenient.b.local)

    def test_rows_of_another_width_are_an_error(self):
        state = self.local_pair().state_dict()
        state["a.weight"] = torch.zeros(3, 5)
        with self.assertRaisesRegex(RuntimeError, r"a.keys / a.weight: .* cannot use table 't' "
                                                  "of dim 5"):
            Pair().load_state_dict(state, strict=True)
        state["a.weight"] = torch.zeros(2, 3)
        with self.assertRaisesRegex(RuntimeError, r"rows must be float32 \[3, dim\]"):
            Pair().load_state_dict(state, strict=True)
        state = self.local_pair().state_dict()
        state["a._extra_state"] = dict(state["a._extra_state"], table="other")
        with self.assertRaisesRegex(ValueError, "was given the state of table 'other'"):
            Pair().load_state_dict(state, strict=True)

    def test_a_module_without_a_table_saves_no_rows(self):
        state = Pair().state_dict()
        self.assertNotIn("a.keys", state)
        self.assertIsNone(state["a._extra_state"]["seed"])
        with self.assertRaisesRegex(RuntimeError, 'Missing key.*"a.keys"'):
            Pair().load_state_dict(state, strict=True)


class ClusterModeTest(unittest.TestCase):
    def test_the_runtime_sees_no_new_parameters_or_buffers(self):
        host = Host(TINY, 7, {"kind": "KIND_UNSPECIFIED"}, "describe")
        self.assertEqual([d.name for d in host.dense],
                         ["fc.weight", "fc.bias", "out.weight", "out.bias"])
        self.assertEqual(list(host.model.emb.named_buffers()), [])
        self.assertEqual(list(host.model.emb.named_parameters()), [])
        # state_dict() inside a worker works and holds no rows (only the batch's are here).
        host.check()
        state = host.model.state_dict()
        self.assertNotIn("emb.weight", state)
        self.assertEqual(state["emb._extra_state"]["table"], "ids")


if __name__ == "__main__":
    unittest.main()
