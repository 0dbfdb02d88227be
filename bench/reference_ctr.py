#!/usr/bin/python3
"""A yardstick outside Syncopate's code: the CTR models in PyTorch on the same files.

Trains logistic regression, wide & deep, DeepFM and DCN-v2 (stacked) on a Criteo-format
train file and reports the test AUC after every epoch. Two recipes:

* --recipe=syncopate (the default): the shapes and the optimizer of
  examples/ctr_{wdl,deepfm,dcn}.textproto: 16-wide embeddings, a 64-32 ReLU MLP, two cross
  layers, Adagrad (lr 0.3, initial accumulator 0.1, eps 1e-7), batch 512, 3 epochs. Features as
  libs/model/ctr_model.h builds them: one embedding row and one linear weight per (column,
  value), log1p(max(x, 0)) numerics with missing as 0. A test value never seen in training gets
  a fresh row of its column (the shards create unseen rows with their initial value too).
* --recipe=standard: what a practitioner writes in a few lines of PyTorch for click logs
  (issue 33's second yardstick): the same shapes; Adam 1e-3 (SparseAdam on the tables);
  values seen fewer than --min_count (10) times in training folded into one out-of-vocabulary
  row per column, which unseen test values read too; a missing-value indicator per numeric
  column next to its log1p.

In both, DeepFM's factorization machine pairs the 26 categorical fields only, and the numerics
reach the linear part and the MLP (ADR 0020: a heavy-tailed count scaling a learned vector makes
every FM pair with it as noisy as the count). --fm_numeric adds the numeric inputs as FM fields
x_j n_j, the layout of Syncopate's DeepFM before ADR 0020 (model.fm_fields
CATEGORICAL_AND_NUMERIC). Likewise DCN-v2's cross layers cross the 26 field embeddings only and
the numerics join the MLP after them (ADR 0021); --cross=all crosses x0 = [e | x] whole, the
layout of Syncopate's DCN before ADR 0021 (model.cross_fields CATEGORICAL_AND_NUMERIC).

With --val=PATH the epoch with the best validation AUC is the one reported ("kept"), as a
training system that keeps its best checkpoint would report it; the test set never chooses.

The RESULT line also gives training_examples_per_second: the training loop's rate alone (data
reading and evaluations excluded), one process with one thread, as bench/torch_peers.py.

Not a runtime dependency: Debian's python3-torch (`./dev reference` installs it).
Usage: bench/reference_ctr.py TRAIN TEST [--val=VAL] [--recipe=syncopate|standard]
       [--models=lr,wdl,deepfm,dcn] [--epochs=3] [--seed=1] [--fm_numeric]
       [--cross=categorical|all]
"""
import argparse
import gzip
import math
import os
import sys
import time

# One thread for OpenBLAS too (it ignores torch.set_num_threads), as bench/torch_peers.py and
# Syncopate's workers; must be set before torch loads OpenBLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

NUMERIC = 13
CATEGORICAL = 26


def read_criteo(path, vocab, indicators):
    """Labels, numerics (n x 13, or n x 26 with missing indicators) and per-column value
    indices into `vocab` (n x 26, every value read gets an index)."""
    opener = gzip.open if path.endswith(".gz") else open
    labels, numeric, categorical = [], [], []
    with opener(path, "rt") as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            labels.append(float(cols[0]))
            row = [math.log1p(max(float(x), 0.0)) if x else 0.0 for x in cols[1:1 + NUMERIC]]
            if indicators:
                row += [0.0 if x else 1.0 for x in cols[1:1 + NUMERIC]]
            numeric.append(row)
            idx = []
            for f_i, value in enumerate(cols[1 + NUMERIC:1 + NUMERIC + CATEGORICAL]):
                table = vocab[f_i]
                # Missing ("") is a value like any other, as in CategoricalKey.
                idx.append(table.setdefault(value, len(table)))
            categorical.append(idx)
    return (torch.tensor(labels), torch.tensor(numeric, dtype=torch.float32),
            torch.tensor(categorical, dtype=torch.int64))


def fold_rare(train_idx, others, sizes, min_count):
    """Maps each column's values seen fewer than min_count times in training (and every value
    training never saw) to index 0, that column's out-of-vocabulary row; the rest to 1..k."""
    folded_sizes = []
    maps = []
    for f, size in enumerate(sizes):
        counts = np.bincount(train_idx[:, f].numpy(), minlength=size)
        kept = counts >= min_count
        mapping = np.zeros(size, dtype=np.int64)
        mapping[kept] = np.arange(1, kept.sum() + 1)
        maps.append(torch.tensor(mapping))
        folded_sizes.append(int(kept.sum()) + 1)
    def apply(idx):
        return torch.stack([maps[f][idx[:, f]] for f in range(len(sizes))], dim=1)
    return apply(train_idx), [apply(o) for o in others], folded_sizes


def auc(scores, labels):
    """Mann-Whitney AUC with ties counted one half (libs/model/auc.h)."""
    order = np.argsort(scores, kind="mergesort")
    s, y = scores[order], labels[order]
    ranks = np.empty(len(s))
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        ranks[i:j + 1] = (i + j) / 2.0 + 1
        i = j + 1
    pos = y > 0.5
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return (ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


class CtrNet(nn.Module):
    def __init__(self, kind, sizes, numeric=NUMERIC, dim=16, hidden=(64, 32), cross_layers=2,
                 fm_numeric=False, cross_numeric=False):
        super().__init__()
        self.kind = kind
        self.fm_numeric_fields = kind == "deepfm" and fm_numeric
        self.cross_numeric = cross_numeric
        self.offsets = torch.tensor(np.concatenate([[0], np.cumsum(sizes)[:-1]]), dtype=torch.int64)
        total = int(sum(sizes))
        self.wide = nn.Embedding(total, 1, sparse=True)
        nn.init.zeros_(self.wide.weight)
        self.wide_numeric = nn.Linear(numeric, 1)
        nn.init.zeros_(self.wide_numeric.weight)
        nn.init.zeros_(self.wide_numeric.bias)
        if kind == "lr":
            return
        self.emb = nn.Embedding(total, dim, sparse=True)
        nn.init.uniform_(self.emb.weight, -0.05, 0.05)
        width = CATEGORICAL * dim + numeric
        if self.fm_numeric_fields:
            self.fm_numeric = nn.Parameter(torch.empty(numeric, dim).uniform_(-0.05, 0.05))
        self.cross = nn.ModuleList()
        if kind == "dcn":
            cross_width = width if cross_numeric else CATEGORICAL * dim
            for _ in range(cross_layers):
                layer = nn.Linear(cross_width, cross_width)
                nn.init.xavier_uniform_(layer.weight)
                nn.init.zeros_(layer.bias)
                self.cross.append(layer)
        layers = []
        for h in hidden:
            linear = nn.Linear(width, h)
            nn.init.kaiming_uniform_(linear.weight, nonlinearity="relu")
            nn.init.zeros_(linear.bias)
            layers += [linear, nn.ReLU()]
            width = h
        out = nn.Linear(width, 1)
        nn.init.xavier_uniform_(out.weight)
        nn.init.zeros_(out.bias)
        layers.append(out)
        self.mlp = nn.Sequential(*layers)

    def forward(self, numeric, categorical):
        keys = categorical + self.offsets
        logit = self.wide(keys).sum(dim=(1, 2)) + self.wide_numeric(numeric).squeeze(1)
        if self.kind == "lr":
            return logit
        e = self.emb(keys)  # n x 26 x dim
        if self.cross_numeric:
            x0 = torch.cat([e.flatten(1), numeric], dim=1)
        else:
            x0 = e.flatten(1)
        x = x0
        for layer in self.cross:
            x = x0 * layer(x) + x
        if not self.cross_numeric:
            x = torch.cat([x, numeric], dim=1)
        logit = logit + self.mlp(x).squeeze(1)
        if self.kind == "deepfm":
            u = e
            if self.fm_numeric_fields:
                u = torch.cat([e, numeric.unsqueeze(2) * self.fm_numeric], dim=1)
            fm = 0.5 * (u.sum(1).pow(2) - u.pow(2).sum(1)).sum(1)
            logit = logit + fm
        return logit


def evaluate(model, xn, xc, y):
    model.eval()
    with torch.no_grad():
        scores = torch.cat([model(xn[b:b + 8192], xc[b:b + 8192])
                            for b in range(0, len(y), 8192)])
    return auc(scores.numpy(), y.numpy())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("train")
    parser.add_argument("test")
    parser.add_argument("--val", default="")
    parser.add_argument("--recipe", choices=["syncopate", "standard"], default="syncopate")
    parser.add_argument("--models", default="lr,wdl,deepfm,dcn")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--lr", type=float, default=None,
                        help="default: 0.3 (syncopate recipe, Adagrad), 1e-3 (standard, Adam)")
    parser.add_argument("--min_count", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--fm_numeric", action="store_true",
                        help="DeepFM: the numeric inputs are FM fields too (before ADR 0020)")
    parser.add_argument("--cross", choices=["all", "categorical"], default="categorical",
                        help="DCN-v2: the cross layers take the categorical embeddings only, the "
                             "numerics joining the MLP after them (ADR 0021), or every input "
                             "(all: Syncopate's DCN before ADR 0021)")
    args = parser.parse_args()
    standard = args.recipe == "standard"
    lr = args.lr if args.lr is not None else (1e-3 if standard else 0.3)
    torch.set_num_threads(1)
    vocab = [dict() for _ in range(CATEGORICAL)]
    t0 = time.time()
    y, xn, xc = read_criteo(args.train, vocab, standard)
    ty, txn, txc = read_criteo(args.test, vocab, standard)
    vy, vxn, vxc = read_criteo(args.val, vocab, standard) if args.val else (None, None, None)
    sizes = [len(v) for v in vocab]
    if standard:
        xc, others, sizes = fold_rare(xc, [txc] + ([vxc] if args.val else []), sizes,
                                      args.min_count)
        txc = others[0]
        if args.val:
            vxc = others[1]
    print(f"read {len(y)} train / {len(ty)} test rows in {time.time() - t0:.1f} s; "
          f"{sum(sizes)} rows per table ({args.recipe} recipe)", flush=True)
    for kind in args.models.split(","):
        torch.manual_seed(args.seed)
        model = CtrNet(kind, sizes, numeric=xn.shape[1], fm_numeric=args.fm_numeric,
                       cross_numeric=args.cross == "all")
        if standard:
            sparse = [p for n, p in model.named_parameters() if n in ("wide.weight", "emb.weight")]
            dense = [p for n, p in model.named_parameters()
                     if n not in ("wide.weight", "emb.weight")]
            optimizers = [torch.optim.SparseAdam(sparse, lr=lr), torch.optim.Adam(dense, lr=lr)]
        else:
            optimizers = [torch.optim.Adagrad(model.parameters(), lr=lr,
                                              initial_accumulator_value=0.1, eps=1e-7)]
        loss_fn = nn.BCEWithLogitsLoss()
        aucs, val_aucs = [], []
        start = time.time()
        training_seconds = 0.0  # the training loop alone, without the evaluations
        for epoch in range(args.epochs):
            model.train()
            epoch_start = time.time()
            perm = torch.randperm(len(y))
            for b in range(0, len(y), args.batch):
                i = perm[b:b + args.batch]
                for optimizer in optimizers:
                    optimizer.zero_grad()
                loss = loss_fn(model(xn[i], xc[i]), y[i])
                loss.backward()
                for optimizer in optimizers:
                    optimizer.step()
            training_seconds += time.time() - epoch_start
            aucs.append(evaluate(model, txn, txc, ty))
            line = f"{kind} epoch {epoch + 1}: test AUC {aucs[-1]:.4f}"
            if args.val:
                val_aucs.append(evaluate(model, vxn, vxc, vy))
                line += f" validation AUC {val_aucs[-1]:.4f}"
            print(f"{line} ({time.time() - start:.0f} s)", flush=True)
        kept = int(np.argmax(val_aucs)) if args.val else len(aucs) - 1
        fm = " fm_numeric=1" if model.kind == "deepfm" and args.fm_numeric else ""
        fm += f" cross={args.cross}" if model.kind == "dcn" else ""
        print(f"RESULT model={kind} recipe={args.recipe}{fm} final_auc={aucs[-1]:.4f} "
              f"kept_auc={aucs[kept]:.4f} kept_epoch={kept + 1} best_auc={max(aucs):.4f} "
              f"best_epoch={int(np.argmax(aucs)) + 1} seconds={time.time() - start:.0f} "
              f"training_examples_per_second={args.epochs * len(y) / training_seconds:.0f}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
