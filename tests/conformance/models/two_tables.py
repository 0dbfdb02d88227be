"""Conformance model: two ShardedEmbedding tables on different features beside a dense tower.

A click model: table "users" (dim 8) reads the feature "user"; table "items" (dim 8) reads
"item" and "history" (five earlier items, mean-pooled) through two modules that share its rows.
A dense tower (linear(6 -> 16) - ReLU) reads six numeric features. One logit per example:
<user, item> + <user, history> + a linear layer over [user, item, history, tower]. Ids are
64-bit hashes (negative ones too, as keys are any 64 bits). Clicks are drawn from a fixed
planted teacher (user and item biases, rank-4 user-item and user-history interactions, a linear
numeric part), so the AUC has a ceiling below 1: the teacher's own logits score 0.885 on the
test set. The job's metric is AUC.
"""
import torch
import torch.nn.functional as F

import syncopate.torch as st

USERS = 100
ITEMS = 80
HISTORY = 5
NUMERIC = 6
DIM = 8
FACTORS = 4


def hashed(ids: torch.Tensor, salt: int) -> torch.Tensor:
    """Small ids spread over all 64 bits (an odd multiplier is a bijection modulo 2**64)."""
    return (ids + salt) * -7046029254386353131  # 0x9E3779B97F4A7C15 as int64; wraps


class Clicks(torch.utils.data.Dataset):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        user = torch.randint(0, USERS, (n,), generator=g)
        item = torch.randint(0, ITEMS, (n,), generator=g)
        history = torch.randint(0, ITEMS, (n, HISTORY), generator=g)
        self.numeric = torch.randn(n, NUMERIC, generator=g)
        t = torch.Generator().manual_seed(500)  # the teacher, shared by both splits
        user_bias = torch.randn(USERS, generator=t)
        item_bias = torch.randn(ITEMS, generator=t)
        u = torch.randn(USERS, FACTORS, generator=t) * 0.7
        v = torch.randn(ITEMS, FACTORS, generator=t) * 0.7
        w = torch.randn(NUMERIC, generator=t) * 0.5
        logit = (user_bias[user] + item_bias[item] + item_bias[history].mean(1)
                 + (u[user] * v[item]).sum(1) + (u[user] * v[history].mean(1)).sum(1)
                 + self.numeric @ w - 0.5)
        self.labels = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()
        self.user = hashed(user, 1)
        self.item = hashed(item, 1_000_000)
        self.history = hashed(history, 1_000_000)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return ({"user": self.user[i], "item": self.item[i], "history": self.history[i],
                 "numeric": self.numeric[i]}, self.labels[i])


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.user = st.ShardedEmbedding("users", DIM, features="user")
        self.item = st.ShardedEmbedding("items", DIM, features="item")
        self.history = st.ShardedEmbedding("items", DIM, features="history", pooling="mean")
        self.tower = torch.nn.Sequential(torch.nn.Linear(NUMERIC, 16), torch.nn.ReLU())
        self.linear = torch.nn.Linear(3 * DIM + 16, 1)

    def forward(self, batch) -> torch.Tensor:
        u = self.user(batch["user"])
        i = self.item(batch["item"])
        h = self.history(batch["history"])
        dense = torch.cat([u, i, h, self.tower(batch["numeric"])], dim=1)
        return (u * i).sum(1) + (u * h).sum(1) + self.linear(dense).squeeze(1)


def model() -> torch.nn.Module:
    return Net()


def train_dataset(data: st.DataSpec) -> Clicks:
    return Clicks(data.train_limit or 4000, seed=501)


def test_dataset(data: st.DataSpec) -> Clicks:
    return Clicks(data.test_limit or 1000, seed=502)


def loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(output, target)
