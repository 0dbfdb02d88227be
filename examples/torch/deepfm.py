"""DeepFM (Guo et al., 2017) on Criteo-format click logs, written in plain PyTorch with its
embedding tables on Syncopate's shards: the model of examples/ctr_deepfm.textproto (16-wide field
embeddings, a linear part with one weight per value, a factorization machine over the 26
categorical fields, a 64-32 ReLU MLP) and of bench/reference_ctr.py's DeepFM. The numeric columns
come from the dataset as the built-in models use them (``numeric="log1p_missing"``: log1p of the
count and a missing flag per column) and reach the linear part and the MLP, not the FM: a
heavy-tailed count scaling FM pairs makes them noisy
(docs/decisions/0020-numerics-out-of-the-fm.md).

Run it with ``syncopate local --job=examples/torch/deepfm.textproto`` after generating the data
(see that file).
"""
import torch

import syncopate.torch as st

NUMERIC = 26  # 13 columns' log1p and their 13 missing flags (numeric="log1p_missing")
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
        numeric = batch["numeric"]  # already log1p(count) and missing flags: see test_dataset
        keys = batch["categorical"]
        e = self.embedding(keys)  # batch x 26 x DIM
        logit = self.linear(keys).squeeze(1) + self.linear_numeric(numeric).squeeze(1)
        logit = logit + self.mlp(torch.cat([e.flatten(1), numeric], dim=1)).squeeze(1)
        fm = 0.5 * (e.sum(dim=1).pow(2) - e.pow(2).sum(dim=1)).sum(dim=1)
        return logit + fm


def model() -> torch.nn.Module:
    return DeepFm()


def train_dataset(data: st.DataSpec) -> st.Criteo:
    return st.Criteo(data.train_path, data.train_limit, block_size=data.block_size,
                     numeric="log1p_missing")


def test_dataset(data: st.DataSpec) -> st.Criteo:
    return st.Criteo(data.test_path, data.test_limit, block_size=data.block_size,
                     numeric="log1p_missing")


def loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.binary_cross_entropy_with_logits(output, target)
