"""DeepFM (Guo et al., 2017) on Criteo-format click logs, written in plain PyTorch with its
embedding tables on Syncopate's shards: the model of examples/ctr_deepfm.textproto (16-wide field
embeddings, a linear part with one weight per value, a factorization machine over the fields and
one learned vector per numeric column, a 64-32 ReLU MLP) and of bench/reference_ctr.py's DeepFM.

Run it with ``syncopate local --job=examples/torch/deepfm.textproto`` after generating the data
(see that file).
"""
import torch

import syncopate.torch as st

NUMERIC = 13
CATEGORICAL = 26
DIM = 16


class DeepFm(torch.nn.Module):
    def __init__(self, hidden=(64, 32)):
        super().__init__()
        # Both tables read the batch's 26 categorical keys (each key encodes its column).
        self.embedding = st.ShardedEmbedding("deep", DIM, features="categorical")
        self.linear = st.ShardedEmbedding("wide", 1, features="categorical", pooling="sum",
                                          init_scale=0.0)
        self.linear_numeric = torch.nn.Linear(NUMERIC, 1)
        torch.nn.init.zeros_(self.linear_numeric.weight)
        torch.nn.init.zeros_(self.linear_numeric.bias)
        self.fm_numeric = torch.nn.Parameter(torch.empty(NUMERIC, DIM).uniform_(-0.05, 0.05))
        layers = []
        width = CATEGORICAL * DIM + NUMERIC
        for h in hidden:
            layer = torch.nn.Linear(width, h)
            torch.nn.init.kaiming_uniform_(layer.weight, nonlinearity="relu")
            torch.nn.init.zeros_(layer.bias)
            layers += [layer, torch.nn.ReLU()]
            width = h
        out = torch.nn.Linear(width, 1)
        torch.nn.init.xavier_uniform_(out.weight)
        torch.nn.init.zeros_(out.bias)
        self.mlp = torch.nn.Sequential(*layers, out)

    def forward(self, batch):
        # Heavy-tailed counts: log1p of the non-negative part; a missing value (NaN) reads as 0.
        numeric = torch.log1p(torch.nan_to_num(batch["numeric"], nan=0.0).clamp(min=0.0))
        keys = batch["categorical"]
        e = self.embedding(keys)  # batch x 26 x DIM
        logit = self.linear(keys).squeeze(1) + self.linear_numeric(numeric).squeeze(1)
        logit = logit + self.mlp(torch.cat([e.flatten(1), numeric], dim=1)).squeeze(1)
        u = torch.cat([e, numeric.unsqueeze(2) * self.fm_numeric], dim=1)
        fm = 0.5 * (u.sum(dim=1).pow(2) - u.pow(2).sum(dim=1)).sum(dim=1)
        return logit + fm


def model() -> torch.nn.Module:
    return DeepFm()


def train_dataset(data: st.DataSpec) -> st.Criteo:
    return st.Criteo(data.train_path, data.train_limit, block_size=data.block_size)


def test_dataset(data: st.DataSpec) -> st.Criteo:
    return st.Criteo(data.test_path, data.test_limit, block_size=data.block_size)


def loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.binary_cross_entropy_with_logits(output, target)
