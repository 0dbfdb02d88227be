"""The pure-numpy readers (syncopate.readers) and the datasets' fallback to them outside
Syncopate's processes: the C++ readers' rules (libs/data) on small files written here, and
Debian's Fashion-MNIST when it is installed."""
import gzip
import math
import os
import struct
import tempfile
import unittest

import numpy as np
import torch

import syncopate.torch as st
from syncopate import keys, readers
from syncopate.torch import data as torch_data

FASHION = "/usr/share/datasets/fashion-mnist"


def line(label="0", numeric=None, categorical=None):
    numeric = numeric if numeric is not None else [""] * 13
    categorical = categorical if categorical is not None else [""] * 26
    return "\t".join([label] + numeric + categorical)


class NativeIsAbsentTest(unittest.TestCase):
    def test_the_tests_exercise_the_fallback(self):
        self.assertIsNone(torch_data._native, "syncopate_native is importable here")


class CriteoTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def write(self, name, text, compress=False):
        data = text.encode()
        if compress:
            data = gzip.compress(data)
        with open(self.path(name), "wb") as f:
            f.write(data)
        return self.path(name)

    def test_parses_numerics_categoricals_and_labels_as_the_cpp(self):
        numeric = ["3", "", "-7", "16777217", "9223372036854775807", "-9223372036854775808",
                   "0", "-0", "1", "2", "", "", "42"]
        categorical = ["a", "FF", "", "0", "fffffffffffffff"] + ["1"] * 21
        path = self.write("x.tsv", line("1", numeric, categorical) + "\n" +
                          line("0") + "\r\n")
        rows = readers.read_criteo(path)
        self.assertEqual(len(rows), 2)
        self.assertEqual(rows.labels.tolist(), [1.0, 0.0])
        self.assertEqual(rows.numeric.dtype, np.float32)
        n = rows.numeric[0]
        self.assertEqual(n[0], 3.0)
        self.assertTrue(np.isnan(n[1]))  # empty = NaN
        self.assertEqual(n[2], -7.0)
        # static_cast<float>(int64): round to nearest even; 2^24 + 1 is not a float.
        self.assertEqual(n[3], 16777216.0)
        self.assertEqual(n[4], np.float32(2.0**63))
        self.assertEqual(n[5], np.float32(-(2.0**63)))
        self.assertEqual(n[12], 42.0)
        self.assertTrue(np.isnan(rows.numeric[1]).all())
        v = rows.values[0]
        self.assertEqual(v.dtype, np.uint64)
        self.assertEqual([int(x) for x in v[:5]], [0xA, 0xFF, keys.MISSING_CATEGORY, 0,
                                                  0xFFFFFFFFFFFFFFF])
        self.assertTrue((rows.values[1] == keys.MISSING_CATEGORY).all())

    def test_a_last_line_without_newline_is_a_row_and_limit_keeps_the_first(self):
        text = "\n".join(line(str(i % 2), categorical=[format(i, "x")] * 26) for i in range(5))
        path = self.write("y.tsv", text)
        self.assertEqual(len(readers.read_criteo(path)), 5)
        rows = readers.read_criteo(path, limit=3)
        self.assertEqual([int(x) for x in rows.values[:, 0]], [0, 1, 2])

    def test_gzip_members_globs_lists_and_a_limit_across_files(self):
        a = self.write("part-0.tsv.gz", line("1", categorical=["a"] * 26) + "\n", compress=True)
        # Two concatenated gzip members read as one stream (cat a.gz b.gz).
        with open(self.path("part-1.tsv.gz"), "wb") as f:
            f.write(gzip.compress((line("0", categorical=["b"] * 26) + "\n").encode()))
            f.write(gzip.compress((line("0", categorical=["c"] * 26) + "\n").encode()))
        plain = self.write("other.tsv", line("1", categorical=["d"] * 26) + "\n")
        self.assertEqual(readers.expand_data_paths(self.path("part-*.tsv.gz") + " , " + plain),
                         [a, self.path("part-1.tsv.gz"), plain])
        rows = readers.read_criteo(self.path("part-*.tsv.gz") + "," + plain)
        self.assertEqual([int(x) for x in rows.values[:, 0]], [0xA, 0xB, 0xC, 0xD])
        limited = readers.read_criteo(self.path("part-*.tsv.gz") + "," + plain, limit=2)
        self.assertEqual([int(x) for x in limited.values[:, 0]], [0xA, 0xB])

    def test_bad_lines_fail_with_the_cpp_message(self):
        cases = [
            (line("2"), "line 2: field label: expected 0 or 1, got '2'"),
            (line("0", categorical=["zz"] + [""] * 25), "line 2: field C1: bad hex 'zz'"),
            (line("0", categorical=[""] * 25 + ["1234567890abcdef"]),
             "line 2: field C26: bad hex '1234567890abcdef'"),
            (line("0", numeric=["9223372036854775808"] + [""] * 12),
             "line 2: field I1: bad integer '9223372036854775808'"),
            (line("0", numeric=[""] * 2 + ["+5"] + [""] * 10), "line 2: field I3: bad integer"),
            ("0\t1\t2", "line 2: expected 40 tab-separated fields, found 3"),
        ]
        for bad, message in cases:
            path = self.write("bad.tsv", line("0") + "\n" + bad + "\n")
            with self.assertRaises(ValueError) as raised:
                readers.read_criteo(path)
            self.assertIn(f"Criteo file '{path}': {message}", str(raised.exception))

    def test_paths_that_name_nothing_are_errors(self):
        with self.assertRaisesRegex(FileNotFoundError, "no file matches"):
            readers.read_criteo(self.path("none-*.tsv"))
        with self.assertRaisesRegex(FileNotFoundError, "cannot open Criteo file"):
            readers.read_criteo(self.path("none.tsv"))
        with self.assertRaisesRegex(ValueError, "empty element"):
            readers.read_criteo(self.path("a.tsv") + ",,")

    def test_the_dataset_gives_the_native_readers_tensors(self):
        values = [format(17 * i + 3, "x") for i in range(26)]
        path = self.write("z.tsv", line("1", ["5"] + [""] * 12, values) + "\n" + line("0") + "\n")
        data = st.Criteo(path, block_size=7)
        self.assertEqual(len(data), 2)
        features, labels = data.__getitems__([1, 0])
        self.assertEqual(features["numeric"].dtype, torch.float32)
        self.assertEqual(features["categorical"].dtype, torch.int64)
        self.assertEqual(labels.tolist(), [0.0, 1.0])
        self.assertEqual(features["numeric"][1, 0].item(), 5.0)
        # Each value as model::CategoricalKey(column, value), its bits as int64.
        expected = keys.criteo_keys(np.array([[17 * i + 3 for i in range(26)]], dtype=np.uint64))
        self.assertTrue(np.array_equal(features["categorical"][1].numpy().view(np.uint64),
                                       expected[0]))
        self.assertEqual(int(features["categorical"][0, 0].numpy().view(np.uint64)),
                         int(keys.categorical_key(0, keys.MISSING_CATEGORY)))
        example, label = data[0]
        self.assertEqual(example["categorical"].shape, (26,))
        self.assertEqual(label.item(), 1.0)
        with self.assertRaisesRegex(IndexError, "example 2 is outside"):
            data.__getitems__([2])
        with self.assertRaisesRegex(ValueError, "block_size"):
            st.Criteo(path, block_size=0)

    def test_the_dataset_gives_the_built_in_models_numeric_inputs_when_asked(self):
        numeric = ["0", "", "-4", "1000000"] + ["3"] * 9
        path = self.write("n.tsv", line("1", numeric) + "\n")
        raw = st.Criteo(path).__getitems__([0])[0]["numeric"][0]
        self.assertTrue(math.isnan(raw[1].item()))
        log1p = st.Criteo(path, numeric="log1p").__getitems__([0])[0]["numeric"][0]
        self.assertEqual(log1p.shape, (13,))
        # log1p(max(x, 0)); a missing value and a negative one both 0; a count of 10^6 is 13.8.
        self.assertEqual(log1p[:3].tolist(), [0.0, 0.0, 0.0])
        self.assertAlmostEqual(log1p[3].item(), math.log1p(1e6), places=5)
        flags = st.Criteo(path, numeric="log1p_missing").__getitems__([0])[0]["numeric"][0]
        self.assertEqual(flags.shape, (26,))
        self.assertTrue(torch.equal(flags[:13], log1p))
        self.assertEqual(flags[13:].tolist(), [0.0, 1.0] + [0.0] * 11)  # only column 1 missing
        with self.assertRaisesRegex(ValueError, "numeric must be one of raw, log1p"):
            st.Criteo(path, numeric="bucket")


def write_idx(directory, prefix, images, labels, compress=True):
    n, rows, cols = images.shape
    image_bytes = struct.pack(">IIII", 0x803, n, rows, cols) + images.astype(np.uint8).tobytes()
    label_bytes = struct.pack(">II", 0x801, len(labels)) + labels.astype(np.uint8).tobytes()
    for name, data in ((f"{prefix}-images-idx3-ubyte.gz", image_bytes),
                       (f"{prefix}-labels-idx1-ubyte.gz", label_bytes)):
        with open(os.path.join(directory, name), "wb") as f:
            f.write(gzip.compress(data) if compress else data)


class FashionMnistTest(unittest.TestCase):
    def test_reads_idx_files_as_the_cpp(self):
        rng = np.random.default_rng(1)
        images = rng.integers(0, 256, (5, 3, 4))
        images[0, 0, :4] = [0, 1, 254, 255]
        labels = np.array([9, 0, 3, 3, 7])
        with tempfile.TemporaryDirectory() as d:
            write_idx(d, "t10k", images, labels)
            write_idx(d, "train", images[:2], labels[:2], compress=False)  # plain works too
            data = st.FashionMnist(d, "test")
            self.assertEqual(len(data), 5)
            self.assertEqual(data.images.shape, (5, 12))
            self.assertEqual(data.images.dtype, torch.float32)
            self.assertEqual(data.labels.dtype, torch.int64)
            self.assertEqual(data.labels.tolist(), labels.tolist())
            # static_cast<float>(v) / 255.0f, a float32 division.
            self.assertEqual(data.images[0, :4].tolist(),
                             [0.0, float(np.float32(1) / np.float32(255)),
                              float(np.float32(254) / np.float32(255)), 1.0])
            self.assertEqual(len(st.FashionMnist(d, "test", limit=2)), 2)
            self.assertEqual(len(st.FashionMnist(d, "train")), 2)
            images_batch, labels_batch = data.__getitems__([4, 0])
            self.assertEqual(labels_batch.tolist(), [7, 9])

    def test_broken_files_are_one_line_errors(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaisesRegex(FileNotFoundError, "apt-get install dataset-fashion-mnist"):
                st.FashionMnist(d, "train")
            write_idx(d, "t10k", np.zeros((3, 2, 2)), np.zeros(2))
            with self.assertRaisesRegex(ValueError, "IDX files disagree"):
                st.FashionMnist(d, "test")
            with open(os.path.join(d, "t10k-labels-idx1-ubyte.gz"), "wb") as f:
                f.write(gzip.compress(struct.pack(">II", 0x803, 3)))
            with self.assertRaisesRegex(ValueError, "magic number 0x00000803, expected "
                                                    "0x00000801"):
                st.FashionMnist(d, "test")

    @unittest.skipUnless(os.path.isdir(FASHION), f"{FASHION} is not installed "
                                                 "(apt-get install dataset-fashion-mnist)")
    def test_debians_fashion_mnist(self):
        test = st.FashionMnist(FASHION, "test", limit=1000)
        self.assertEqual(test.images.shape, (1000, 784))
        # The published test set opens with an ankle boot, a pullover and two trousers.
        self.assertEqual(test.labels[:4].tolist(), [9, 2, 1, 1])
        self.assertGreaterEqual(float(test.images.min()), 0.0)
        self.assertEqual(float(test.images.max()), 1.0)
        train = st.FashionMnist(FASHION, "train", limit=10)
        self.assertEqual(train.labels[:4].tolist(), [9, 0, 0, 3])


if __name__ == "__main__":
    unittest.main()
