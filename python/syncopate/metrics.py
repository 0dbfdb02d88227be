"""The evaluator's metrics in numpy, for scoring an exported model outside the cluster.

:func:`auc` is ``libs/model/auc.h``'s ``BinaryAuc``: the exact ROC AUC, Mann-Whitney U over
positives x negatives with ties counting one half, so a score computed here compares with the
cluster's evaluation to float rounding.
"""

import numpy as np

__all__ = ["auc"]


def auc(scores, labels) -> float:
    """ROC AUC of ``scores`` against 0/1 ``labels`` (a label > 0.5 is a positive), by ranks;
    equal scores share their mean rank. Needs at least one positive and one negative."""
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    labels = np.asarray(labels).reshape(-1)
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    i = 0
    while i < len(scores):
        j = i
        while j + 1 < len(scores) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    positive = labels > 0.5
    p, n = int(positive.sum()), int((~positive).sum())
    if p == 0 or n == 0:
        raise ValueError("AUC needs at least one positive and one negative label")
    return float((ranks[positive].sum() - p * (p + 1) / 2.0) / (p * n))
