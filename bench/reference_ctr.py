#!/usr/bin/python3
"""A yardstick outside Syncopate's code: the CTR models in PyTorch on the same files.

Trains logistic regression, wide & deep, DeepFM and DCN-v2 (stacked) on a Criteo-format
train file and reports the test AUC after every epoch, with the shapes and the optimizer of
examples/ctr_{wdl,deepfm,dcn}.textproto: 16-wide embeddings, a 64-32 ReLU MLP, two cross
layers, Adagrad (lr 0.3, initial accumulator 0.1, eps 1e-7), batch 512, 3 epochs. Features as
libs/model/ctr_model.h builds them: one embedding row and one linear weight per (column,
value), log1p(max(x, 0)) numerics with missing as 0. A test value never seen in training gets
a fresh row of its column (the shards create unseen rows with their initial value too).

Not a runtime dependency: Debian's python3-torch (`./dev reference` installs it).
Usage: bench/reference_ctr.py TRAIN TEST [--models=lr,wdl,deepfm,dcn] [--epochs=3] [--seed=1]
"""
import argparse
import gzip
import math
import sys
import time

import numpy as np
import torch
from torch import nn

NUMERIC = 13
CATEGORICAL = 26


def read_criteo(path, vocab):
    """Labels, numerics (n x 13, transformed) and per-column value indices (n x 26)."""
    opener = gzip.open if path.endswith(".gz") else open
    labels, numeric, categorical = [], [], []
    with opener(path, "rt") as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            labels.append(float(cols[0]))
            row = []
            for x in cols[1:1 + NUMERIC]:
                row.append(math.log1p(max(float(x), 0.0)) if x else 0.0)
            numeric.append(row)
            idx = []
            for f_i, value in enumerate(cols[1 + NUMERIC:1 + NUMERIC + CATEGORICAL]):
                table = vocab[f_i]
                # Missing ("") is a value like any other, as in CategoricalKey.
                idx.append(table.setdefault(value, len(table)))
            categorical.append(idx)
    return (torch.tensor(labels), torch.tensor(numeric, dtype=torch.float32),
            torch.tensor(categorical, dtype=torch.int64))


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
    def __init__(self, kind, sizes, dim=16, hidden=(64, 32), cross_layers=2):
        super().__init__()
        self.kind = kind
        self.offsets = torch.tensor(np.concatenate([[0], np.cumsum(sizes)[:-1]]), dtype=torch.int64)
        total = int(sum(sizes))
        self.wide = nn.Embedding(total, 1, sparse=True)
        nn.init.zeros_(self.wide.weight)
        self.wide_numeric = nn.Linear(NUMERIC, 1)
        nn.init.zeros_(self.wide_numeric.weight)
        nn.init.zeros_(self.wide_numeric.bias)
        if kind == "lr":
            return
        self.emb = nn.Embedding(total, dim, sparse=True)
        nn.init.uniform_(self.emb.weight, -0.05, 0.05)
        width = CATEGORICAL * dim + NUMERIC
        if kind == "deepfm":
            self.fm_numeric = nn.Parameter(torch.empty(NUMERIC, dim).uniform_(-0.05, 0.05))
        self.cross = nn.ModuleList()
        if kind == "dcn":
            for _ in range(cross_layers):
                layer = nn.Linear(width, width)
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
        x0 = torch.cat([e.flatten(1), numeric], dim=1)
        x = x0
        for layer in self.cross:
            x = x0 * layer(x) + x
        logit = logit + self.mlp(x).squeeze(1)
        if self.kind == "deepfm":
            u = torch.cat([e, numeric.unsqueeze(2) * self.fm_numeric], dim=1)
            fm = 0.5 * (u.sum(1).pow(2) - u.pow(2).sum(1)).sum(1)
            logit = logit + fm
        return logit


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("train")
    parser.add_argument("test")
    parser.add_argument("--models", default="lr,wdl,deepfm,dcn")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--lr", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(1)
    vocab = [dict() for _ in range(CATEGORICAL)]
    t0 = time.time()
    y, xn, xc = read_criteo(args.train, vocab)
    ty, txn, txc = read_criteo(args.test, vocab)
    sizes = [len(v) for v in vocab]
    print(f"read {len(y)} train / {len(ty)} test rows in {time.time() - t0:.1f} s; "
          f"{sum(sizes)} distinct values", flush=True)
    for kind in args.models.split(","):
        torch.manual_seed(args.seed)
        model = CtrNet(kind, sizes)
        optimizer = torch.optim.Adagrad(model.parameters(), lr=args.lr,
                                        initial_accumulator_value=0.1, eps=1e-7)
        loss_fn = nn.BCEWithLogitsLoss()
        aucs = []
        start = time.time()
        for epoch in range(args.epochs):
            model.train()
            perm = torch.randperm(len(y))
            for b in range(0, len(y), args.batch):
                i = perm[b:b + args.batch]
                optimizer.zero_grad()
                loss = loss_fn(model(xn[i], xc[i]), y[i])
                loss.backward()
                optimizer.step()
            model.eval()
            with torch.no_grad():
                scores = torch.cat([model(txn[b:b + 8192], txc[b:b + 8192])
                                    for b in range(0, len(ty), 8192)])
            aucs.append(auc(scores.numpy(), ty.numpy()))
            print(f"{kind} epoch {epoch + 1}: test AUC {aucs[-1]:.4f} "
                  f"({time.time() - start:.0f} s)", flush=True)
        print(f"RESULT model={kind} final_auc={aucs[-1]:.4f} best_auc={max(aucs):.4f} "
              f"best_epoch={int(np.argmax(aucs)) + 1} seconds={time.time() - start:.0f}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
