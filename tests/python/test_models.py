"""syncopate.models against the C++ built-in models: cases small enough to work out by hand, the
C++ forward transcribed over the flat parameter vector (cpp_reference.py, float64), and the
PyTorch yardstick bench/reference_ctr.py where the two share math."""
import importlib.util
import math
import os
import unittest

import numpy as np
import torch

from syncopate import keys, models
from syncopate.torch.embedding import LocalTable

import cpp_reference as cpp

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "reference_ctr.py")
SEED = 11
DEEP_INIT = keys.Initializer("UNIFORM", scale=0.05)


def local(name, rows, init, absent="initial", dim=None):
    """A LocalTable from {uint64 key: row}."""
    ids = np.array(sorted(rows), dtype=np.uint64)
    order = np.argsort(ids.view(np.int64))
    ids = ids[order]
    dim = dim if dim is not None else len(next(iter(rows.values())))
    values = np.array([rows[int(k)] for k in ids], dtype=np.float32).reshape(len(ids), dim)
    return LocalTable(name, torch.from_numpy(ids.view(np.int64).copy()),
                      torch.from_numpy(values), init, SEED, absent)


def batch_of(numeric, values):
    return {"numeric": torch.tensor(np.asarray(numeric, dtype=np.float32)),
            "categorical": torch.from_numpy(keys.criteo_keys(values).view(np.int64))}


def ctr_model(kind, flat, e, hidden=(), crosses=(), cross_layers=0, indicators=False,
              deep=None, wide=None, deep_absent="initial", fm_numeric=False, cross_numeric=False):
    model = models.CtrModel(kind, e, hidden, crosses, cross_layers, indicators, fm_numeric,
                            cross_numeric)
    model.load_cluster_dense(flat.export())
    model.embedding.use_local_table(local("deep", deep or {}, DEEP_INIT, deep_absent, dim=e))
    model.wide.use_local_table(local("wide", wide or {}, keys.Initializer("ZEROS"), dim=1))
    return model


def zero_flat(specs, **tensors):
    """A flat vector of zeros with some tensors set (given as [rows x cols] matrices)."""
    flat = cpp.Flat(specs, np.zeros(sum(r * c for _, r, c in specs)))
    for name, matrix in tensors.items():
        offset, rows, cols = flat.offsets[name.replace("__", "/")]
        flat.values[offset:offset + rows * cols] = np.asarray(matrix, np.float32).reshape(
            rows, cols).T.reshape(-1)  # column-major
    return flat


def key(field, value):
    return int(keys.categorical_key(field, value))


class HandWorkedTest(unittest.TestCase):
    """Tiny models whose logits follow from ctr_model.h's formulas in a line of arithmetic."""

    def values(self):
        v = np.zeros((1, 26), dtype=np.uint64)
        v[0, :4] = [5, 6, 7, 8]
        return v

    def test_wide_and_deep_with_missing_indicators_and_a_cross(self):
        # e = 1, no hidden layer: logit = w . x0 + b + v . x + sum of wide rows.
        specs = cpp.ctr_tensors("WDL", 1, [], 0, True)
        w = np.zeros((1, 26 + 26))
        w[0, 0] = 2.0      # field 0's embedding
        w[0, 26] = 0.5     # numeric 0
        v = np.zeros((1, 26))
        v[0, 0] = 1.5      # numeric 0
        v[0, 1] = 7.0      # numeric 1: missing reads 0, so no contribution ...
        v[0, 13 + 1] = 0.25  # ... but its indicator is 1
        v[0, 2] = 9.0      # numeric 2 = -5: log1p(max(x, 0)) = 0
        flat = zero_flat(specs, deep_out__w=w, deep_out__b=[[-1.0]], wide__numeric=v)
        values = self.values()
        cross = int(keys.cross_key(0, 5, 8))  # cross (0, 3) of values 5 and 8
        model = ctr_model("WDL", flat, 1, crosses=[(0, 3)], indicators=True,
                          deep={key(0, 5): [0.25]}, wide={key(0, 5): [1.0], cross: [0.75]})
        numeric = [[1.0, math.nan, -5.0] + [0.0] * 10]
        logit = model(batch_of(numeric, values)).item()
        x0 = math.log(2.0)  # log1p(1)
        expected = 2 * 0.25 + 0.5 * x0 - 1.0 + 1.5 * x0 + 0.25 + 1.0 + 0.75
        self.assertAlmostEqual(logit, expected, places=6)
        self.assertAlmostEqual(model.probability(batch_of(numeric, values)).item(),
                               1 / (1 + math.exp(-expected)), places=7)

    def test_deepfm_adds_the_pairwise_interactions(self):
        # Only the FM: fields 0 and 1 have rows (1, 2) and (3, -1), the others zero rows;
        # numeric 0 = 3 (x = log 4) has vector (0.5, 0.5):
        # FM = <u0,u1> + x<u0,n0> + x<u1,n0> = 1 + 1.5x + 1.0x.
        specs = cpp.ctr_tensors("DEEPFM", 2, [], 0, False, fm_numeric=True)
        n = np.zeros((2, 13))
        n[:, 0] = 0.5
        flat = zero_flat(specs, fm__numeric=n)
        values = self.values()
        deep = {key(f, values[0, f]): [0.0, 0.0] for f in range(26)}
        deep[key(0, 5)] = [1.0, 2.0]
        deep[key(1, 6)] = [3.0, -1.0]
        model = ctr_model("DEEPFM", flat, 2, deep=deep, fm_numeric=True)
        logit = model(batch_of([[3.0] + [math.nan] * 12], values)).item()
        self.assertAlmostEqual(logit, 1 + 2.5 * math.log(4.0), places=5)
        # The default FM (model.fm_fields CATEGORICAL_ONLY, ADR 0020) pairs the fields only.
        flat = zero_flat(cpp.ctr_tensors("DEEPFM", 2, [], 0, False))
        model = ctr_model("DEEPFM", flat, 2, deep=deep)
        self.assertNotIn("fm/numeric", model.cluster_dense())
        logit = model(batch_of([[3.0] + [math.nan] * 12], values)).item()
        self.assertAlmostEqual(logit, 1.0, places=5)

    def test_dcn_crosses_each_input_with_x0(self):
        # One cross layer over the 26 embeddings (e = 1), W = e_0 e_0^T, b = 0.5 e_0:
        # c1[0] = c0[0] (c0[0] + 0.5) + c0[0]. The output unit reads c1[0] and, below the 26
        # crossed rows, the first numeric input passed through unchanged: with u0 = 2 and a
        # count of e - 1 (x = 1), logit = 2 * 2.5 + 2 + 1 = 8.
        # With cross_numeric (x0 = [e | x], 39 wide) the count is crossed too: b[26] = 0.5 makes
        # row 26 x (0 + 0.5) + x = 1.5 and the logit 8.5.
        for cross_numeric, width, expected in ((False, 26, 8.0), (True, 39, 8.5)):
            specs = cpp.ctr_tensors("DCN", 1, [], 1, False, cross_numeric=cross_numeric)
            cross = np.zeros((width, width))
            cross[0, 0] = 1.0
            b = np.zeros((width, 1))
            b[0, 0] = 0.5
            if cross_numeric:
                b[26, 0] = 0.5
            out = np.zeros((1, 39))
            out[0, 0] = 1.0
            out[0, 26] = 1.0
            flat = zero_flat(specs, cross0__w=cross, cross0__b=b, deep_out__w=out)
            model = ctr_model("DCN", flat, 1, cross_layers=1, deep={key(0, 5): [2.0]},
                              cross_numeric=cross_numeric)
            logit = model(batch_of([[math.e - 1] + [0.0] * 12], self.values())).item()
            self.assertAlmostEqual(logit, expected, places=5)

    def test_mlp_is_relu_between_layers_and_softmax(self):
        # 2 -> 2 -> 2: h = relu([[1, -1], [0, 2]] x + (0, -1)); z = [[1, 0], [0, 1]] h.
        specs = cpp.mlp_tensors(2, [2], 2)
        flat = zero_flat(specs, dense0__w=[[1, -1], [0, 2]], dense0__b=[[0], [-1]],
                         dense1__w=[[1, 0], [0, 1]])
        model = models.Mlp(2, [2], 2)
        model.load_cluster_dense(flat.export())
        x = torch.tensor([[3.0, 1.0], [1.0, 2.0]])
        self.assertEqual(model(x).tolist(), [[2.0, 1.0], [0.0, 3.0]])
        p = model.probabilities(x)[0].tolist()
        self.assertAlmostEqual(p[0], math.e / (math.e + 1), places=7)


class AgainstTheCppForwardTest(unittest.TestCase):
    """Random parameters and tables: the module against cpp_reference's float64 transcription.
    Some keys have rows, some not (deep: initial value or zeros; wide: zeros)."""

    def check(self, kind, e, hidden, crosses, cross_layers, indicators, deep_absent="initial",
              fm_numeric=False, cross_numeric=False):
        specs = cpp.ctr_tensors(kind, e, hidden, cross_layers, indicators, fm_numeric,
                                cross_numeric)
        flat = cpp.Flat.random(specs, seed=len(specs) + e)
        rng = np.random.default_rng(7)
        n = 16
        values = rng.integers(0, 4, (n, 26)).astype(np.uint64)
        values[3, 5] = keys.MISSING_CATEGORY
        numeric = rng.integers(-2, 50, (n, 13)).astype(np.float32)
        numeric[rng.random((n, 13)) < 0.3] = np.nan
        used = {key(f, values[j, f]) for j in range(n) for f in range(26)}
        crossed = {int(keys.cross_key(c, values[j, a], values[j, b]))
                   for j in range(n) for c, (a, b) in enumerate(crosses)}
        held = sorted(used)[::2]  # half the keys have rows
        deep = {k: rng.uniform(-0.5, 0.5, e) for k in held}
        wide = {k: rng.uniform(-0.5, 0.5, 1) for k in held + sorted(crossed)[::2]}

        def deep_row(k):
            if k in deep:
                return deep[k]
            if deep_absent == "zeros":
                return np.zeros(e)
            return keys.initial_rows(DEEP_INIT, SEED, "deep", [k], e)[0]

        expected = cpp.ctr_logits(kind, e, hidden, crosses, cross_layers, indicators, flat,
                                  numeric, values, deep_row,
                                  lambda k: wide[k][0] if k in wide else 0.0)
        model = ctr_model(kind, flat, e, hidden, crosses, cross_layers, indicators, deep, wide,
                          deep_absent, fm_numeric, cross_numeric)
        with torch.no_grad():
            batch = batch_of(numeric, values)
            logits = model(batch).numpy()
            probability = model.probability(batch).numpy()
        np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(probability, 1 / (1 + np.exp(-expected)), rtol=0, atol=1e-6)
        self.assertEqual(probability.dtype, np.float32)

    def test_wdl(self):
        self.check("WDL", 4, [8, 3], [(0, 3), (5, 2)], 0, False)

    def test_wdl_with_missing_indicators_and_admission(self):
        self.check("WDL", 3, [5], [], 0, True, deep_absent="zeros")

    def test_deepfm(self):
        self.check("DEEPFM", 4, [6], [(1, 2)], 0, True)

    def test_deepfm_with_numeric_fm_fields(self):
        self.check("DEEPFM", 4, [6], [(1, 2)], 0, True, fm_numeric=True)

    def test_dcn(self):
        self.check("DCN", 2, [4], [], 2, True)

    def test_dcn_with_numeric_crosses(self):
        self.check("DCN", 2, [4], [(0, 1)], 2, True, cross_numeric=True)

    def test_mlp(self):
        specs = cpp.mlp_tensors(12, [7, 5], 4)
        flat = cpp.Flat.random(specs, seed=3)
        model = models.Mlp(12, [7, 5], 4)
        model.load_cluster_dense(flat.export())
        x = np.random.default_rng(2).random((9, 12)).astype(np.float32)
        with torch.no_grad():
            got = model.probabilities(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(got, cpp.mlp_probabilities(flat, x, 3), rtol=0, atol=1e-6)

    def test_cluster_dense_is_the_inverse_of_loading(self):
        for kind, layers, fm, cross in (("WDL", 0, False, False), ("DEEPFM", 0, False, False),
                                        ("DEEPFM", 0, True, False), ("DCN", 2, False, False),
                                        ("DCN", 2, False, True)):
            specs = cpp.ctr_tensors(kind, 2, [3], layers, True, fm, cross)
            flat = cpp.Flat.random(specs, seed=5)
            model = models.CtrModel(kind, 2, [3], [], layers, True, fm, cross)
            model.load_cluster_dense(flat.export())
            back = model.cluster_dense()
            self.assertEqual(list(back), [name for name, _, _ in specs])
            for name, value in flat.export().items():
                self.assertTrue(np.array_equal(back[name], value), name)


class AgainstReferenceCtrTest(unittest.TestCase):
    """bench/reference_ctr.py's CtrNet (the PyTorch yardstick) computes the same logit from the
    same rows; it has a bias on the numerics' linear term, which the C++ model has not (zero)."""

    @classmethod
    def setUpClass(cls):
        spec = importlib.util.spec_from_file_location("reference_ctr", SCRIPT)
        cls.reference = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cls.reference)

    def check(self, kind, indicators, fm_numeric=False, cross_numeric=False):
        torch.manual_seed(3)
        u = 26 if indicators else 13
        net = self.reference.CtrNet(kind.lower(), [5] * 26, numeric=u, dim=4, hidden=(6, 3),
                                    cross_layers=2 if kind == "DCN" else 0, fm_numeric=fm_numeric,
                                    cross_numeric=cross_numeric)
        with torch.no_grad():
            for p in net.parameters():
                p.uniform_(-0.3, 0.3)
            net.wide_numeric.bias.zero_()
        ours = models.CtrModel(kind, 4, [6, 3], [], 2 if kind == "DCN" else 0, indicators,
                               fm_numeric, cross_numeric)
        with torch.no_grad():
            ours.deep[0].weight.copy_(net.mlp[0].weight)
            ours.deep[0].bias.copy_(net.mlp[0].bias)
            ours.deep[1].weight.copy_(net.mlp[2].weight)
            ours.deep[1].bias.copy_(net.mlp[2].bias)
            ours.deep_out.weight.copy_(net.mlp[4].weight)
            ours.deep_out.bias.copy_(net.mlp[4].bias)
            ours.wide_numeric.weight.copy_(net.wide_numeric.weight)
            if fm_numeric:
                ours.fm_numeric.copy_(net.fm_numeric)
            for mine, theirs in zip(ours.cross, net.cross):
                mine.weight.copy_(theirs.weight)
                mine.bias.copy_(theirs.bias)
        rng = np.random.default_rng(4)
        raw = rng.integers(-1, 30, (10, 13)).astype(np.float32)
        raw[rng.random((10, 13)) < 0.3] = np.nan
        transformed = np.log1p(np.maximum(np.nan_to_num(raw, nan=0.0), 0.0))
        if indicators:
            transformed = np.concatenate([transformed, np.isnan(raw).astype(np.float32)], 1)
        index = torch.from_numpy(rng.integers(0, 5, (10, 26)))
        with torch.no_grad():
            expected = net(torch.from_numpy(transformed.astype(np.float32)), index)
            rows = index + net.offsets
            got = ours.head(torch.from_numpy(raw), net.emb(rows), net.wide(rows).squeeze(2))
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)

    def test_wdl(self):
        self.check("WDL", False)

    def test_deepfm_with_missing_indicators(self):
        self.check("DEEPFM", True)

    def test_deepfm_with_numeric_fm_fields(self):
        self.check("DEEPFM", True, fm_numeric=True)

    def test_dcn(self):
        self.check("DCN", True)

    def test_dcn_with_numeric_crosses(self):
        self.check("DCN", True, cross_numeric=True)


class OptionsTest(unittest.TestCase):
    def test_from_manifest_builds_each_kind(self):
        mlp = models.from_manifest({"kind": "MLP", "input_dim": 784, "hidden": [256, 128],
                                    "classes": 10})
        self.assertEqual([n for n, _ in mlp.named_parameters()],
                         ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias",
                          "layers.2.weight", "layers.2.bias"])
        dcn = models.from_manifest({"kind": "DCN", "hidden": [64, 32], "embedding_dim": 16,
                                    "crosses": [[0, 3]], "cross_layers": 2,
                                    "missing_indicators": True})
        self.assertEqual(dcn.input_dim, 26 * 16 + 26)
        self.assertEqual(dcn.cross[0].in_features, 26 * 16)  # the embeddings only (ADR 0021)
        self.assertEqual(models.from_manifest({"kind": "DCN", "cross_layers": 1,
                                               "cross_numeric": True}).cross[0].in_features,
                         26 * 16 + 13)
        self.assertEqual(dcn.crosses, ((0, 3),))
        self.assertEqual(dcn.embedding.table, "deep")
        self.assertEqual(dcn.wide.table, "wide")

    def test_bad_options_are_the_cpp_messages(self):
        with self.assertRaisesRegex(ValueError, "cross of fields 2 and 2 needs two different"):
            models.CtrModel("WDL", 4, [], [(2, 2)])
        with self.assertRaisesRegex(ValueError, r"DCN needs cross_layers in \[1, 16\], got 0"):
            models.CtrModel("DCN", 4, [], [], 0)
        with self.assertRaisesRegex(ValueError, "cross_layers is only for DCN"):
            models.CtrModel("WDL", 4, [], [], 1)
        with self.assertRaisesRegex(ValueError, "cross_numeric is only for DCN"):
            models.CtrModel("DEEPFM", 4, cross_numeric=True)
        with self.assertRaisesRegex(ValueError, "not a built-in model"):
            models.from_manifest({"kind": "TORCH"})
        with self.assertRaisesRegex(ValueError, r"'deep_out/w' has shape \[2, 1\], expected"):
            models.CtrModel("WDL", 1).load_cluster_dense(
                dict(cpp.Flat.random(cpp.ctr_tensors("WDL", 1, [], 0, False), 1).export(),
                     **{"deep_out/w": np.zeros((2, 1), np.float32)}))


if __name__ == "__main__":
    unittest.main()
