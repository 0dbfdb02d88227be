"""A click-through model nobody wrote for the examples, for tests/integration/export_test.sh: two
sharded tables (field embeddings and a pooled linear part) and a dense tower with BatchNorm, whose
running statistics are buffers the shards hold (ADR 0018)."""
import torch

import syncopate.torch as st


class Tower(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = st.ShardedEmbedding("fields", 8, features="categorical")
        self.linear = st.ShardedEmbedding("linear", 1, features="categorical", pooling="sum",
                                          init_scale=0.0)
        self.hidden = torch.nn.Linear(26 * 8 + 13, 32)
        self.norm = torch.nn.BatchNorm1d(32)
        self.out = torch.nn.Linear(32, 1)

    def forward(self, batch):
        numeric = torch.log1p(torch.nan_to_num(batch["numeric"], nan=0.0).clamp(min=0.0))
        keys = batch["categorical"]
        x = torch.cat([self.embedding(keys).flatten(1), numeric], dim=1)
        h = torch.relu(self.norm(self.hidden(x)))
        return (self.out(h) + self.linear(keys)).squeeze(1)


def model():
    return Tower()


def train_dataset(data):
    return st.Criteo(data.train_path, data.train_limit, block_size=data.block_size)


def test_dataset(data):
    return st.Criteo(data.test_path, data.test_limit, block_size=data.block_size)


def loss(output, target):
    return torch.nn.functional.binary_cross_entropy_with_logits(output, target)
