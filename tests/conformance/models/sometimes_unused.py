"""Conformance model: parameters that get no gradient in some steps.

A residual MLP whose three middle blocks are each skipped for a whole batch with probability
0.3 while training (LayerDrop, Fan et al. 2019; drawn from torch's generator, so from the
batch's seed), and an auxiliary head that is never called: in a step that skips a block, that
block's parameters get no gradient (``p.grad is None``), and the auxiliary head never does. The
cluster pushes a zero gradient for them; see README "Your own model" for what that means with
momentum. Data: 16 Gaussian features, 3 classes from a fixed random teacher.
"""
import torch
import torch.nn.functional as F

import syncopate.torch as st

FEATURES = 16
CLASSES = 3
WIDTH = 48
DROP = 0.3


class Teacher(torch.utils.data.Dataset):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, FEATURES, generator=g)
        t = torch.Generator().manual_seed(400)
        w1 = torch.randn(FEATURES, 24, generator=t)
        w2 = torch.randn(24, CLASSES, generator=t)
        self.y = (torch.relu(self.x @ w1) @ w2).argmax(dim=1)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        return self.x[i], self.y[i]


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = torch.nn.Linear(FEATURES, WIDTH)
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU())
            for _ in range(3))
        self.out = torch.nn.Linear(WIDTH, CLASSES)
        self.auxiliary = torch.nn.Linear(WIDTH, CLASSES)  # never used: never a gradient

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.inp(x))
        for block in self.blocks:
            if self.training and float(torch.rand(())) < DROP:
                continue  # LayerDrop: this batch skips the block
            h = h + block(h)
        return self.out(h)


def model() -> torch.nn.Module:
    return Net()


def train_dataset(data: st.DataSpec) -> Teacher:
    return Teacher(data.train_limit or 4000, seed=401)


def test_dataset(data: st.DataSpec) -> Teacher:
    return Teacher(data.test_limit or 1000, seed=402)


loss = F.cross_entropy
