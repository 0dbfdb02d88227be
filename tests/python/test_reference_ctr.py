"""bench/reference_ctr.py, the CTR yardstick: its feature reading (missing indicators), the
rare-value fold of --recipe=standard, and a tiny end-to-end run that keeps the best validation
epoch."""
import contextlib
import importlib.util
import io
import os
import random
import sys
import tempfile
import unittest

import torch

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "reference_ctr.py")
spec = importlib.util.spec_from_file_location("reference_ctr", SCRIPT)
reference_ctr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reference_ctr)


def criteo_line(label, numeric, categorical):
    return "\t".join([str(label)] + numeric + categorical) + "\n"


def write_rows(path, rows, seed):
    """`rows` random Criteo lines whose label follows C1 (values "a" click, "b" do not)."""
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(rows):
            value = rng.choice(["a", "b"])
            label = int(rng.random() < (0.8 if value == "a" else 0.2))
            numeric = [str(rng.randint(0, 9)) if rng.random() < 0.7 else "" for _ in range(13)]
            categorical = [value] + [format(rng.randint(0, 40), "x") for _ in range(25)]
            f.write(criteo_line(label, numeric, categorical))


class ReadCriteoTest(unittest.TestCase):
    def test_missing_numerics_read_as_zero_and_set_their_indicator(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x.tsv")
            numeric = ["3", ""] + ["0"] * 11
            with open(path, "w") as f:
                f.write(criteo_line(1, numeric, ["a"] * 26))
            vocab = [dict() for _ in range(26)]
            y, xn, xc = reference_ctr.read_criteo(path, vocab, indicators=True)
            self.assertEqual(xn.shape, (1, 26))
            self.assertAlmostEqual(xn[0, 0].item(), torch.log1p(torch.tensor(3.0)).item(), 6)
            self.assertEqual(xn[0, 1].item(), 0.0)  # missing: 0 ...
            self.assertEqual(xn[0, 13 + 1].item(), 1.0)  # ... and its indicator is set
            self.assertEqual(xn[0, 13 + 0].item(), 0.0)
            self.assertEqual(xn[0, 13 + 2].item(), 0.0)  # a count of 0 is not missing
            _, plain, _ = reference_ctr.read_criteo(path, vocab, indicators=False)
            self.assertEqual(plain.shape, (1, 13))


class FoldRareTest(unittest.TestCase):
    def test_values_seen_fewer_than_min_count_times_and_unseen_ones_share_row_zero(self):
        # Column 0: value 0 seen 3 times, value 1 once; value 2 only in the test rows.
        train = torch.tensor([[0], [0], [0], [1]])
        test = torch.tensor([[1], [2], [0]])
        folded, (folded_test,), sizes = reference_ctr.fold_rare(train, [test], [3], 2)
        self.assertEqual(sizes, [2])  # the out-of-vocabulary row and value 0's
        self.assertEqual(folded.flatten().tolist(), [1, 1, 1, 0])
        self.assertEqual(folded_test.flatten().tolist(), [0, 0, 1])


class DcnCrossTest(unittest.TestCase):
    def test_categorical_crosses_leave_the_numerics_to_the_mlp(self):
        sizes = [3] * 26
        torch.manual_seed(1)
        crossed = reference_ctr.CtrNet("dcn", sizes, numeric=26, dim=4, cross_numeric=True)
        kept_out = reference_ctr.CtrNet("dcn", sizes, numeric=26, dim=4)  # the default
        self.assertEqual(crossed.cross[0].in_features, 26 * 4 + 26)
        self.assertEqual(kept_out.cross[0].in_features, 26 * 4)
        # The MLP still sees every input: the crosses' output and the numerics.
        self.assertEqual(kept_out.mlp[0].in_features, 26 * 4 + 26)
        numeric = torch.zeros(2, 26)
        categorical = torch.zeros(2, 26, dtype=torch.int64)
        base = kept_out(numeric, categorical)
        # A huge count changes the logit only through the MLP and the linear part: with the
        # MLP's first layer blind to it and the linear weight 0, nothing changes.
        with torch.no_grad():
            kept_out.mlp[0].weight[:, 26 * 4:] = 0
        numeric[:, 0] = 14.0
        self.assertTrue(torch.allclose(kept_out(numeric, categorical), base))


class EndToEndTest(unittest.TestCase):
    def test_standard_recipe_reports_the_epoch_validation_chose(self):
        with tempfile.TemporaryDirectory() as d:
            paths = [os.path.join(d, name) for name in ("train.tsv", "test.tsv", "val.tsv")]
            for seed, (path, rows) in enumerate(zip(paths, (2000, 500, 500))):
                write_rows(path, rows, seed)
            out = io.StringIO()
            argv = ["reference_ctr.py", paths[0], paths[1], "--val=" + paths[2],
                    "--recipe=standard", "--models=lr", "--epochs=2", "--lr=0.05"]
            old_argv, sys.argv = sys.argv, argv
            try:
                with contextlib.redirect_stdout(out):
                    self.assertEqual(reference_ctr.main(), 0)
            finally:
                sys.argv = old_argv
            result = [line for line in out.getvalue().splitlines()
                      if line.startswith("RESULT")]
            self.assertEqual(len(result), 1, out.getvalue())
            fields = dict(kv.split("=") for kv in result[0].split()[1:])
            self.assertEqual(fields["recipe"], "standard")
            self.assertIn(fields["kept_epoch"], ("1", "2"))
            # C1 decides the click (Bayes AUC 0.8 * 0.8 + (0.8 * 0.2 + 0.2 * 0.8) / 2 = 0.74; a
            # model that learned nothing is at 0.5).
            self.assertGreater(float(fields["kept_auc"]), 0.6)
            # The training loop's own rate (bench/ctr_quality.sh compares it with the cluster's).
            self.assertGreater(float(fields["training_examples_per_second"]), 0)
            lines = out.getvalue().splitlines()
            self.assertTrue(any("validation AUC" in line for line in lines), lines)


if __name__ == "__main__":
    unittest.main()
