"""syncopate.keys against the C++: the values the C++ unit tests pin (tests/unit/common/
splitmix64_test.cc, tests/unit/tensor/initializer_test.cc, tests/unit/model/ctr_model_test.cc),
and against an independent pure-Python computation (int arithmetic masked to 64 bits)."""
import math
import struct
import unittest

import numpy as np

from syncopate import keys

M = (1 << 64) - 1


# --- the independent reference: Python ints, masked, one value at a time -------------------
def py_splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M
    return x ^ (x >> 31)


def py_derive_seed(parent, value):
    return py_splitmix64(parent ^ py_splitmix64(value))


def py_fnv1a64(name):
    h = 0xCBF29CE484222325
    for b in name.encode():
        h = ((h ^ b) * 0x100000001B3) & M
    return h


def py_float32(x):
    """Rounds a double to float32 the way a C++ static_cast<float> does (via struct)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def py_initial_row(limit, seed, table, key, dim):
    stream = py_derive_seed(py_derive_seed(seed, py_fnv1a64(table)), key)
    out = []
    for j in range(dim):
        bits = py_splitmix64((stream + j) & M)
        unit = (bits >> 40) / 16777216.0
        out.append(py_float32((2.0 * unit - 1.0) * limit))
    return out


def ulps_apart(a, b):
    """How many float32 steps separate a and b (EXPECT_FLOAT_EQ allows 4)."""
    ia = np.array([a], dtype=np.float32).view(np.int32)[0]
    ib = np.array([b], dtype=np.float32).view(np.int32)[0]
    return abs(int(ia) - int(ib))


class SplitMix64Test(unittest.TestCase):
    def test_matches_the_cpp_pinned_values(self):
        gamma = 0x9E3779B97F4A7C15
        # splitmix64_test.cc: the reference generator seeded with 0, and the wrap at the top.
        self.assertEqual(int(keys.splitmix64(0)), 0xE220A8397B1DCDAF)
        self.assertEqual(int(keys.splitmix64(gamma)), 0x6E789E6AA1B965F4)
        self.assertEqual(int(keys.splitmix64(2 * gamma & M)), 0x06C45D188009454F)
        self.assertEqual(int(keys.splitmix64(3 * gamma & M)), 0xF88BB8A8724C81EC)
        self.assertEqual(int(keys.splitmix64(M)), 0xE4D971771B652C20)

    def test_derive_seed_matches_the_cpp_pinned_values(self):
        self.assertEqual(int(keys.derive_seed(0, 0)), 0xA706DD2F4D197E6F)
        self.assertEqual(int(keys.derive_seed(42, 7)), 0x6EAB8625DF268FBC)
        self.assertEqual(int(keys.derive_seed(7, 42)), 0x16062D6C1339E500)

    def test_vectorised_equals_python_ints_without_warnings(self):
        rng = np.random.default_rng(3)
        x = rng.integers(0, 2**63, 500, dtype=np.int64).view(np.uint64) * np.uint64(2) + \
            np.uint64(1)
        with np.errstate(all="raise"):  # wrapping must not be reported as an overflow
            got = keys.splitmix64(x)
            derived = keys.derive_seed(x[::-1], x)
            scalar = keys.splitmix64(np.uint64(M))
        self.assertEqual(got.dtype, np.uint64)
        self.assertEqual([int(v) for v in got], [py_splitmix64(int(v)) for v in x])
        self.assertEqual([int(v) for v in derived],
                         [py_derive_seed(int(p), int(v)) for p, v in zip(x[::-1], x)])
        self.assertEqual(int(scalar), py_splitmix64(M))

    def test_signed_inputs_are_bit_patterns(self):
        # torch holds keys as int64: -1 is the key 2**64 - 1.
        self.assertEqual(int(keys.splitmix64(-1)), py_splitmix64(M))
        self.assertEqual(int(keys.splitmix64(np.array([-1], dtype=np.int64))[0]),
                         py_splitmix64(M))

    def test_unsplitmix64_inverts_it(self):
        x = np.array([0, 1, 2, 12345, M, 1 << 63, 0x0123456789ABCDEF], dtype=np.uint64)
        self.assertTrue(np.array_equal(keys.unsplitmix64(keys.splitmix64(x)), x))
        self.assertTrue(np.array_equal(keys.splitmix64(keys.unsplitmix64(x)), x))


class InitializerTest(unittest.TestCase):
    def test_fnv1a64_of_the_empty_string_is_the_offset_basis(self):
        self.assertEqual(keys.fnv1a64(""), 0xCBF29CE484222325)
        self.assertEqual(keys.fnv1a64("a"), 0xAF63DC4C8601EC8C)  # FNV's published test vector
        self.assertEqual(keys.fnv1a64("dense0/w"), py_fnv1a64("dense0/w"))

    def assert_float_eq(self, got, pinned):
        # EXPECT_FLOAT_EQ's 4 ulps; in fact the 9-digit literals round-trip exactly.
        self.assertLessEqual(ulps_apart(got, pinned), 4, (got, pinned))
        self.assertEqual(np.float32(got), np.float32(pinned))

    def test_initialize_row_matches_the_cpp_pinned_values(self):
        row = keys.initial_rows(keys.Initializer("UNIFORM", scale=0.05), 7, "C1", [12345], 3)
        self.assertEqual(row.shape, (1, 3))
        self.assertEqual(row.dtype, np.float32)
        for got, pinned in zip(row[0], (-0.0192568954, -0.0438899919, -0.0411998257)):
            self.assert_float_eq(got, pinned)

    def test_initialize_slice_matches_the_cpp_pinned_values(self):
        he = keys.initial_slice(keys.Initializer("HE_UNIFORM", fan_in=6, fan_out=1), 7,
                                "dense0/w", 100, 3)
        for got, pinned in zip(he, (0.511322975, 0.272893429, -0.67734015)):
            self.assert_float_eq(got, pinned)
        uniform = keys.initial_slice(keys.Initializer("UNIFORM", scale=0.5), 7, "emb", 100, 3)
        for got, pinned in zip(uniform, (0.462107122, 0.489980638, -0.246582627)):
            self.assert_float_eq(got, pinned)

    def test_rows_equal_the_python_int_computation_for_every_kind(self):
        cases = [(keys.Initializer("UNIFORM", scale=0.05), 0.05),
                 (keys.Initializer("HE_UNIFORM", fan_in=784, fan_out=256), math.sqrt(6 / 784)),
                 (keys.Initializer("GLOROT_UNIFORM", fan_in=256, fan_out=128),
                  math.sqrt(6 / 384))]
        ids = [0, 1, 42, M, 1 << 63, 0xDEADBEEF]
        for init, limit in cases:
            rows = keys.initial_rows(init, 3, "deep", np.array(ids, dtype=np.uint64), 5)
            for i, key in enumerate(ids):
                self.assertEqual(rows[i].tolist(), py_initial_row(limit, 3, "deep", key, 5),
                                 (init, key))
        zeros = keys.initial_rows(keys.Initializer("ZEROS"), 3, "wide", ids, 1)
        self.assertEqual(zeros.tolist(), [[0.0]] * len(ids))

    def test_a_shorter_row_is_a_prefix_and_int64_ids_are_keys(self):
        init = keys.Initializer("UNIFORM", scale=0.1)
        long = keys.initial_rows(init, 3, "C7", [42], 16)
        self.assertTrue(np.array_equal(keys.initial_rows(init, 3, "C7", [42], 4), long[:, :4]))
        signed = keys.initial_rows(init, 3, "C7", np.array([-1], dtype=np.int64), 4)
        self.assertTrue(np.array_equal(signed, keys.initial_rows(init, 3, "C7", [M], 4)))

    def test_unusable_initializers_are_one_line_errors(self):
        with self.assertRaisesRegex(ValueError, "UNIFORM of tensor 't' needs a finite scale"):
            keys.initial_rows(keys.Initializer("UNIFORM", scale=0.0), 1, "t", [5], 4)
        with self.assertRaisesRegex(ValueError, "needs fan_in > 0"):
            keys.initial_slice(keys.Initializer("HE_UNIFORM"), 1, "t", 0, 4)
        with self.assertRaisesRegex(ValueError, "no usable initializer kind"):
            keys.initial_rows(keys.Initializer("KIND_UNSPECIFIED"), 1, "t", [5], 4)
        with self.assertRaisesRegex(ValueError, "negative offset"):
            keys.initial_slice(keys.Initializer("ZEROS"), 1, "t", -1, 4)


class CtrKeysTest(unittest.TestCase):
    def test_match_the_cpp_pinned_values(self):
        # ctr_model_test.cc CtrModelKeys.AreFixedByDefinition.
        self.assertEqual(int(keys.categorical_key(0, 0)), 0x5E41AB087439611E)
        self.assertEqual(int(keys.categorical_key(4, 99)), 0xE4DC3516701A269B)
        self.assertEqual(int(keys.cross_key(0, 1, 2)), 0x0384CF4093B4548F)

    def test_equal_the_python_int_definitions(self):
        # CategoricalKey(f, v) = DeriveSeed(v, f + 1); CrossKey(c, a, b) =
        # CategoricalKey(26 + c, SplitMix64(a) ^ b).
        for field, value in [(0, 7), (25, M), (13, 0xABCDEF)]:
            self.assertEqual(int(keys.categorical_key(field, value)),
                             py_derive_seed(value, field + 1))
        for cross, a, b in [(0, 5, 9), (3, M, 0), (1, 0x123, 0x456)]:
            self.assertEqual(int(keys.cross_key(cross, a, b)),
                             py_derive_seed(py_splitmix64(a) ^ b, 26 + cross + 1))

    def test_criteo_keys_mix_each_column_and_invert(self):
        rng = np.random.default_rng(5)
        values = rng.integers(0, 1 << 60, (7, 26), dtype=np.int64).astype(np.uint64)
        values[2, 3] = keys.MISSING_CATEGORY
        got = keys.criteo_keys(values)
        self.assertEqual(got.shape, (7, 26))
        self.assertEqual(got.dtype, np.uint64)
        for row, field in [(0, 0), (2, 3), (6, 25)]:
            self.assertEqual(int(got[row, field]),
                             py_derive_seed(int(values[row, field]), field + 1))
        self.assertTrue(np.array_equal(keys.criteo_values(got), values))
        self.assertTrue(np.array_equal(keys.criteo_values(got.view(np.int64)), values))
        with self.assertRaisesRegex(ValueError, r"\[n, 26\]"):
            keys.criteo_keys(values[:, :25])


if __name__ == "__main__":
    unittest.main()
