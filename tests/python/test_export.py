"""syncopate.export on bundles written here as docs/export-format.md lays them out: the
safetensors layout, reading a bundle, a PyTorch job's state dict loaded strictly into a fresh
model(), the built-in models' state dicts, predict and ONNX (scored with onnxruntime-node when
npm can install it), and the command line the C++ `syncopate export` runs."""
import contextlib
import io
import json
import os
import shutil
import struct
import subprocess
import tempfile
import unittest
import warnings

import numpy as np
import torch

import syncopate.torch as st
from syncopate import export, keys, models
from syncopate.safetensors import read_safetensors, write_safetensors
from syncopate.torch._host import load_user_module
from syncopate.torch.embedding import TableRows

import bundles
import cpp_reference as cpp

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE = os.path.join(HERE, "testdata", "export_model.py")
ONNX_TOOLS = os.path.join(HERE, "..", "export", "onnx_tools.sh")
SCORE_ONNX = os.path.join(HERE, "..", "export", "score_onnx.cjs")
SEED = 5


def read_json(path):
    with open(path) as f:
        return json.load(f)


class SafetensorsTest(unittest.TestCase):
    def test_the_layout_byte_by_byte(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x.safetensors")
            a = np.array([[1.5, -2.0]], dtype=np.float32)
            write_safetensors(path, {"b/w": a, "a": np.array([7], dtype=np.float32)})
            with open(path, "rb") as f:
                data = f.read()
            (n,) = struct.unpack("<Q", data[:8])
            self.assertEqual(n % 8, 0)  # padded with spaces
            header = json.loads(data[8:8 + n])
            self.assertEqual(list(header), ["b/w", "a"])  # the writer's order
            self.assertEqual(header["b/w"], {"dtype": "F32", "shape": [1, 2],
                                             "data_offsets": [0, 8]})
            self.assertEqual(header["a"]["data_offsets"], [8, 12])
            self.assertEqual(data[8 + n:], struct.pack("<3f", 1.5, -2.0, 7.0))
            back = read_safetensors(path)
            self.assertEqual(list(back), ["b/w", "a"])
            self.assertTrue(np.array_equal(back["b/w"], a))

    def test_reads_a_file_written_by_hand_and_refuses_broken_ones(self):
        header = json.dumps({"__metadata__": {"by": "hand"},
                             "t": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]}})
        body = struct.pack("<qq", -3, 1 << 40)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x.safetensors")
            with open(path, "wb") as f:
                f.write(struct.pack("<Q", len(header)) + header.encode() + body)
            self.assertEqual(read_safetensors(path)["t"].tolist(), [-3, 1 << 40])
            with open(path, "wb") as f:
                f.write(struct.pack("<Q", len(header)) + header.encode() + body[:8])
            with self.assertRaisesRegex(ValueError, r"tensor 't' .* has bytes \[0, 16\) of 8"):
                read_safetensors(path)


class ReadBundleTest(unittest.TestCase):
    def test_tables_load_in_int64_order_from_lazy_chunks(self):
        high = (1 << 63) + 5
        with tempfile.TemporaryDirectory() as d:
            bundles.write_bundle(d, {"kind": "MLP"}, {"w": np.zeros((2, 2))}, {
                "t": (np.array([high, 3, 9, 1, 1 << 63], dtype=np.uint64),
                      np.arange(10, dtype=np.float32).reshape(5, 2), {"kind": "ZEROS"},
                      "zeros"),
                "empty": (np.zeros(0, np.uint64), np.zeros((0, 3)), {"kind": "ZEROS"},
                          "zeros")}, chunk_rows=2)
            bundle = export.read_bundle(d)
            table = bundle.tables["t"]
            self.assertEqual(len(table.chunks), 3)
            self.assertIsInstance(table.chunks[0].keys(), np.memmap)
            loaded_keys, rows = table.load()
            self.assertEqual(loaded_keys.dtype, np.int64)
            # uint64 order 1, 3, 9, 2^63, 2^63 + 5 -> int64 order: the high keys first.
            self.assertEqual(loaded_keys.view(np.uint64).tolist(), [1 << 63, high, 1, 3, 9])
            self.assertEqual(rows[:, 0].tolist(), [8.0, 0.0, 6.0, 2.0, 4.0])
            empty_keys, empty_rows = bundle.tables["empty"].load()
            self.assertEqual((empty_keys.shape, empty_rows.shape), ((0,), (0, 3)))

    def test_a_broken_bundle_is_one_line_naming_the_part(self):
        with tempfile.TemporaryDirectory() as d:
            bundles.write_bundle(d, {"kind": "MLP"}, {"w": np.zeros((2, 2))}, {
                "t": (np.array([1, 2, 3]), np.zeros((3, 2)), {"kind": "ZEROS"}, "zeros")},
                chunk_rows=2)
            # Chunks out of order: the second holds a key below the first's.
            np.save(os.path.join(d, "tables/t/keys-00001.npy"), np.array([0], dtype=np.uint64))
            with self.assertRaisesRegex(ValueError, "keys-00001.npy: keys are not unique and "
                                                    "ascending"):
                export.read_bundle(d).tables["t"].load()
            manifest = read_json(os.path.join(d, "manifest.json"))
            manifest["dense"][0]["name"] = "v"
            with open(os.path.join(d, "manifest.json"), "w") as f:
                json.dump(manifest, f)
            with self.assertRaisesRegex(ValueError, "disagree on dense tensors"):
                export.read_bundle(d)
        with self.assertRaisesRegex(FileNotFoundError, "no manifest.json"):
            export.read_bundle(HERE)


def trained_torch_job(directory, roles_override=None, drop=(), extra=None):
    """A TORCH bundle of export_model.py with 'trained' values; returns (bundle dir, the
    trained module, the tables as {name: {int64 id: row}})."""
    user = load_user_module(MODULE)
    torch.manual_seed(SEED)
    trained = user.model()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(torch.randn(p.shape, generator=g))
        trained.bn.running_mean.copy_(torch.randn(5, generator=g))
        trained.bn.running_var.copy_(torch.rand(5, generator=g) + 0.5)
        trained.bn.num_batches_tracked.fill_(17)
    dense, roles = {}, {}
    for name, p in trained.named_parameters():
        dense[name] = p.detach().numpy()
    for name, b in trained.named_buffers():
        dense[name] = b.numpy().astype(np.float32)
        roles[name] = "buffer"
    roles.update(roles_override or {})
    for name in drop:
        del dense[name]
    dense.update(extra or {})
    rng = np.random.default_rng(2)
    ids = {int(i): rng.normal(size=4).astype(np.float32) for i in range(-6, 30, 2)}
    tags = {int(i): rng.normal(size=2).astype(np.float32) for i in (0, 3, 5)}

    def table(rows, init, absent):
        k = np.array(list(rows), dtype=np.int64)
        return k, np.array(list(rows.values())), init, absent

    bundles.write_bundle(directory, {"kind": "TORCH", "module": MODULE}, dense, {
        "ids": table(ids, {"kind": "UNIFORM", "scale": 0.05}, "initial"),
        "tags": table(tags, {"kind": "ZEROS"}, "initial")}, seed=SEED, roles=roles)
    return directory, trained, {"ids": ids, "tags": tags}


def cluster_output(trained, tables, batch):
    """What a worker computes: each table's rows pulled for the batch's distinct ids (a row, or
    the initializer's value for an id without one), then the module in cluster mode."""
    features = {"ids": batch["ids"], "tags": batch["tags"]}
    inits = {"ids": keys.Initializer("UNIFORM", scale=0.05), "tags": keys.Initializer("ZEROS")}
    slots = {}
    for name, rows in tables.items():
        slot = TableRows()
        slot.keys = torch.unique(features[name].reshape(-1))
        pulled = []
        for k in slot.keys.tolist():
            pulled.append(rows[k] if k in rows else
                          keys.initial_rows(inits[name], SEED, name, [k], len(
                              next(iter(rows.values()))))[0])
        slot.rows = torch.tensor(np.array(pulled), dtype=torch.float32)
        slots[name] = slot
    for module in trained.modules():
        if isinstance(module, st.ShardedEmbedding):
            module.slot = slots[module.table]
    trained.eval()
    with torch.no_grad():
        return trained(batch)


class TorchJobTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.batch = load_user_module(MODULE).Data(12, 9)
        self.inputs = torch.utils.data.default_collate([self.batch[i] for i in range(12)])[0]

    def test_a_fresh_model_loads_the_state_dict_strictly_and_scores_as_the_cluster(self):
        bundle, trained, tables = trained_torch_job(os.path.join(self.dir.name, "b"))
        out = os.path.join(self.dir.name, "model.pt")
        export.write_state_dict(bundle, out)
        fresh = load_user_module(MODULE).model()  # another seed's initial values
        result = fresh.load_state_dict(torch.load(out), strict=True)
        self.assertEqual((result.missing_keys, result.unexpected_keys), ([], []))
        fresh.eval()
        with torch.no_grad():
            got = fresh(self.inputs)
        self.assertTrue(torch.equal(got, cluster_output(trained, tables, self.inputs)))
        state = torch.load(out, weights_only=True)  # no pickled code: torch 2.6's default
        # The tied weight under both names; BatchNorm's count back in its own dtype.
        self.assertTrue(torch.equal(state["encode.weight"], trained.encode.weight))
        self.assertTrue(torch.equal(state["decode.weight"], trained.encode.weight))
        self.assertEqual(state["bn.num_batches_tracked"].dtype, torch.int64)
        self.assertEqual(state["bn.num_batches_tracked"].item(), 17)
        # Both modules of table "ids" share one copy of its rows in the file.
        self.assertEqual(fresh.ids_bag.local.rows.data_ptr(),
                         fresh.ids_first.local.rows.data_ptr())
        self.assertEqual(state["ids_bag._extra_state"]["seed"], SEED)
        probabilities = export.predict(bundle, self.inputs)
        expected = torch.softmax(got.double(), dim=1).float().numpy()
        self.assertTrue(np.array_equal(probabilities, expected))

    def test_an_export_without_buffers_keeps_the_modules_own_and_warns(self):
        bundle, _, _ = trained_torch_job(
            os.path.join(self.dir.name, "b"),
            drop=("bn.running_mean", "bn.running_var", "bn.num_batches_tracked"))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = export.load_model(bundle)
        self.assertEqual(len(caught), 1)
        self.assertIn("bn.running_mean, bn.running_var, bn.num_batches_tracked",
                      str(caught[0].message))
        self.assertEqual(model.bn.running_var.tolist(), [1.0] * 5)

    def test_missing_or_extra_tensors_are_errors_naming_them(self):
        cases = [({"drop": ("bn.running_var",)}, "no dense tensor for buffer 'bn.running_var'"),
                 ({"drop": ("fc.bias",)}, "no dense tensor for parameter 'fc.bias'"),
                 ({"extra": {"head.weight": np.zeros(2, np.float32)}},
                  "no parameter or buffer 'head.weight'")]
        for i, (change, message) in enumerate(cases):
            bundle, _, _ = trained_torch_job(os.path.join(self.dir.name, str(i)), **change)
            with self.assertRaisesRegex(ValueError, message):
                export.load_model(bundle)

    def test_the_command_line(self):
        bundle, _, _ = trained_torch_job(os.path.join(self.dir.name, "b"))
        out = os.path.join(self.dir.name, "cli.pt")
        self.assertEqual(export.main([bundle, "--state-dict", out, "--module", MODULE]), 0)
        self.assertIn("fc.weight", torch.load(out))
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            self.assertEqual(export.main([bundle, "--onnx", out + ".onnx"]), 1)
        self.assertIn("syncopate.export: ONNX export is for the built-in models",
                      stderr.getvalue())
        self.assertFalse(os.path.exists(out + ".onnx"))


def ctr_bundle(directory, kind, e=3, hidden=(4,), crosses=((0, 3),), cross_layers=0,
               indicators=True, n=20):
    """A built-in CTR bundle with random values, its flat vector, tables and a batch."""
    specs = cpp.ctr_tensors(kind, e, hidden, cross_layers, indicators)
    flat = cpp.Flat.random(specs, seed=9)
    rng = np.random.default_rng(3)
    values = rng.integers(0, 6, (n, 26)).astype(np.uint64)
    numeric = rng.integers(-1, 40, (n, 13)).astype(np.float32)
    numeric[rng.random((n, 13)) < 0.3] = np.nan
    used = sorted({int(keys.categorical_key(f, values[j, f])) for j in range(n)
                   for f in range(26)})
    crossed = sorted({int(keys.cross_key(c, values[j, a], values[j, b])) for j in range(n)
                      for c, (a, b) in enumerate(crosses)})
    deep = {k: rng.uniform(-0.3, 0.3, e) for k in used[::2]}
    wide = {k: rng.uniform(-0.3, 0.3, 1) for k in (used + crossed)[1::2]}
    model = {"kind": kind, "hidden": list(hidden), "embedding_dim": e,
             "crosses": [list(c) for c in crosses], "cross_layers": cross_layers,
             "missing_indicators": indicators}
    bundles.write_bundle(directory, model, flat.export(), bundles.ctr_tables(deep, wide),
                         seed=SEED)

    def deep_row(k):
        return deep[k] if k in deep else keys.initial_rows(
            keys.Initializer("UNIFORM", scale=0.05), SEED, "deep", [k], e)[0]

    expected = cpp.ctr_logits(kind, e, hidden, crosses, cross_layers, indicators, flat,
                              numeric, values, deep_row,
                              lambda k: wide[k][0] if k in wide else 0.0)
    return directory, numeric, values, 1 / (1 + np.exp(-expected))


def criteo_file(path, numeric, values):
    with open(path, "w") as f:
        for j in range(len(numeric)):
            cells = ["1"] + ["" if np.isnan(x) else str(int(x)) for x in numeric[j]]
            cells += [format(int(v), "x") for v in values[j]]
            f.write("\t".join(cells) + "\n")


class BuiltinJobTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def test_ctr_state_dict_and_predict_match_the_cpp_forward(self):
        for kind, layers in (("WDL", 0), ("DEEPFM", 0), ("DCN", 1)):
            bundle, numeric, values, expected = ctr_bundle(
                os.path.join(self.dir.name, kind), kind, cross_layers=layers)
            # The path a cross-language test takes: a Criteo file read by syncopate.torch.Criteo.
            path = os.path.join(self.dir.name, f"{kind}.tsv")
            criteo_file(path, numeric, values)
            batch, _ = st.Criteo(path).__getitems__(list(range(len(numeric))))
            probability = export.predict(bundle, batch)
            self.assertEqual(probability.shape, (len(numeric),))
            np.testing.assert_allclose(probability, expected, rtol=0, atol=1e-6, err_msg=kind)
            out = os.path.join(self.dir.name, f"{kind}.pt")
            export.write_state_dict(bundle, out)
            manifest = read_json(os.path.join(bundle, "manifest.json"))
            fresh = models.from_manifest(manifest["model"])
            fresh.load_state_dict(torch.load(out), strict=True)
            with torch.no_grad():
                self.assertTrue(np.array_equal(fresh.probability(batch).numpy(), probability))

    def test_mlp_predict_matches_the_cpp_forward(self):
        specs = cpp.mlp_tensors(6, [5, 4], 3)
        flat = cpp.Flat.random(specs, seed=2)
        bundle = bundles.write_bundle(os.path.join(self.dir.name, "mlp"),
                                      {"kind": "MLP", "input_dim": 6, "hidden": [5, 4],
                                       "classes": 3}, flat.export(), {})
        x = np.random.default_rng(0).random((7, 6)).astype(np.float32)
        np.testing.assert_allclose(export.predict(bundle, x), cpp.mlp_probabilities(flat, x, 3),
                                   rtol=0, atol=1e-6)


class OnnxTest(unittest.TestCase):
    """The ONNX graphs: checked by onnx.checker on export, scored by onnxruntime-node."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.tools = None
        cls.why_not = ""
        if shutil.which("node") is None or shutil.which("npm") is None:
            cls.why_not = "node and npm are not installed (apt-get install nodejs npm)"
            return
        try:
            done = subprocess.run([ONNX_TOOLS], capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            cls.why_not = "npm did not install onnxruntime-node within 300 s"
            return
        if done.returncode != 0:
            cls.why_not = f"npm could not install onnxruntime-node: {done.stderr.strip()[-300:]}"
            return
        cls.tools = done.stdout.strip().splitlines()[-1]

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def score(self, path, inputs):
        if self.tools is None:
            self.skipTest(f"onnxruntime-node is unavailable: {self.why_not}")
        work = tempfile.mkdtemp(dir=self.dir.name)
        spec = {}
        for name, value in inputs.items():
            file = os.path.join(work, f"in-{name}.f32")
            np.ascontiguousarray(value, dtype="<f4").tofile(file)
            spec[name] = {"dims": list(value.shape), "file": file}
        with open(os.path.join(work, "inputs.json"), "w") as f:
            json.dump(spec, f)
        out = os.path.join(work, "out.json")
        env = dict(os.environ, NODE_PATH=os.path.join(self.tools, "node_modules"))
        done = subprocess.run(["node", SCORE_ONNX, path, os.path.join(work, "inputs.json"), out],
                              capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        results = {}
        for name, result in read_json(out).items():
            results[name] = np.fromfile(result["file"], dtype="<f4").reshape(result["dims"])
        return results

    def check_graph(self, path, inputs, outputs):
        import onnx

        graph = onnx.load(path)
        self.assertLessEqual(max(o.version for o in graph.opset_import if o.domain in ("",
                                                                                      "ai.onnx")),
                             17)
        self.assertEqual([i.name for i in graph.graph.input], inputs)
        self.assertEqual([o.name for o in graph.graph.output], outputs)
        batch_axis = graph.graph.input[0].type.tensor_type.shape.dim[0]
        self.assertEqual(batch_axis.dim_param, "batch")  # any batch size

    def test_ctr_head(self):
        for kind, layers in (("DEEPFM", 0), ("DCN", 2)):
            bundle, numeric, values, expected = ctr_bundle(
                os.path.join(self.dir.name, kind), kind, cross_layers=layers, n=33)
            path = os.path.join(self.dir.name, f"{kind}.onnx")
            export.write_onnx(bundle, path)
            self.check_graph(path, ["numeric", "deep_rows", "wide_rows"], ["probability"])
            model = export.load_model(bundle)
            batch = {"numeric": torch.from_numpy(numeric),
                     "categorical": torch.from_numpy(keys.criteo_keys(values).view(np.int64))}
            with torch.no_grad():
                deep_rows, wide_rows = model.lookup(batch)
                torch_probability = model.head_probability(batch["numeric"], deep_rows,
                                                           wide_rows).numpy()
            np.testing.assert_allclose(torch_probability, expected, rtol=0, atol=1e-6)
            scored = self.score(path, {"numeric": numeric, "deep_rows": deep_rows.numpy(),
                                       "wide_rows": wide_rows.numpy()})
            np.testing.assert_allclose(scored["probability"], torch_probability, rtol=0,
                                       atol=1e-5, err_msg=kind)

    def test_mlp(self):
        specs = cpp.mlp_tensors(784, [16], 10)
        flat = cpp.Flat.random(specs, seed=4, scale=0.1)
        bundle = bundles.write_bundle(os.path.join(self.dir.name, "mlp"),
                                      {"kind": "MLP", "input_dim": 784, "hidden": [16],
                                       "classes": 10}, flat.export(), {})
        path = os.path.join(self.dir.name, "mlp.onnx")
        self.assertEqual(export.main([bundle, "--onnx", path]), 0)
        self.check_graph(path, ["features"], ["probabilities"])
        x = np.random.default_rng(1).random((5, 784)).astype(np.float32)
        expected = export.predict(bundle, x)
        scored = self.score(path, {"features": x})
        np.testing.assert_allclose(scored["probabilities"], expected, rtol=0, atol=1e-5)


if __name__ == "__main__":
    unittest.main()
