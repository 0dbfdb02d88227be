"""Conformance model: frozen parameters (``requires_grad=False``) under a trainable head.

A "pretrained" backbone — linear(20 -> 64), BatchNorm1d, tanh, built from its own fixed seed as
a loaded checkpoint would be — is frozen twice over: its parameters take no gradient and its
BatchNorm stays in eval mode (``train()`` is overridden), so it normalises with its stored
running statistics and never changes them. The head, linear(64 -> 64) - ReLU - linear(64 -> 4),
trains. Data: 20 Gaussian features, the class the argmax of a fixed random teacher network.
"""
import torch
import torch.nn.functional as F

import syncopate.torch as st

FEATURES = 20
CLASSES = 4


class Teacher(torch.utils.data.Dataset):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, FEATURES, generator=g)
        t = torch.Generator().manual_seed(300)  # the same teacher for both splits
        w1 = torch.randn(FEATURES, 32, generator=t)
        w2 = torch.randn(32, CLASSES, generator=t)
        self.y = (torch.tanh(self.x @ w1 / FEATURES ** 0.5) @ w2).argmax(dim=1)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        return self.x[i], self.y[i]


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = torch.nn.Sequential(torch.nn.Linear(FEATURES, 64),
                                            torch.nn.BatchNorm1d(64), torch.nn.Tanh())
        # Pretrained values: the same whatever the job's seed, as loading a checkpoint gives.
        g = torch.Generator().manual_seed(7)
        with torch.no_grad():
            for p in self.backbone.parameters():
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
            self.backbone[1].running_mean.copy_(torch.randn(64, generator=g) * 0.1)
            self.backbone[1].running_var.copy_(1 + torch.rand(64, generator=g))
        self.backbone.requires_grad_(False)
        self.head = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                        torch.nn.Linear(64, CLASSES))

    def train(self, mode: bool = True) -> "Net":
        super().train(mode)
        self.backbone.eval()  # frozen BatchNorm: its running statistics, never updated
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


def model() -> torch.nn.Module:
    return Net()


def train_dataset(data: st.DataSpec) -> Teacher:
    return Teacher(data.train_limit or 4000, seed=301)


def test_dataset(data: st.DataSpec) -> Teacher:
    return Teacher(data.test_limit or 1000, seed=302)


loss = F.cross_entropy
