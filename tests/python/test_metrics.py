"""syncopate.metrics.auc: the evaluator's exact AUC (libs/model/auc.h BinaryAuc)."""

import unittest

import numpy as np

from syncopate.metrics import auc


class AucTest(unittest.TestCase):
    def test_counts_correctly_ordered_pairs(self):
        # Positive x negative pairs: 0.35 > 0.1, 0.35 < 0.4, 0.8 > both: 3 of 4 ordered right.
        self.assertEqual(auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]), 0.75)
        self.assertEqual(auc([0.9, 0.8, 0.1], [1, 1, 0]), 1.0)
        self.assertEqual(auc([0.9, 0.8, 0.1], [0, 0, 1]), 0.0)

    def test_ties_count_one_half(self):
        self.assertEqual(auc([0.5, 0.5], [0, 1]), 0.5)
        self.assertEqual(auc([0.2, 0.5, 0.5, 0.7], [0, 0, 1, 1]), 0.875)

    def test_matches_counting_every_pair(self):
        rng = np.random.default_rng(3)
        scores = rng.integers(0, 20, 300).astype(np.float32)  # many ties
        labels = rng.random(300) < 0.3
        pos, neg = scores[labels], scores[~labels]
        expected = ((pos[:, None] > neg[None, :]).sum() +
                    0.5 * (pos[:, None] == neg[None, :]).sum()) / (len(pos) * len(neg))
        self.assertAlmostEqual(auc(scores, labels.astype(np.float32)), expected, places=12)

    def test_one_class_is_refused(self):
        with self.assertRaises(ValueError):
            auc([0.1, 0.2], [1, 1])


if __name__ == "__main__":
    unittest.main()
