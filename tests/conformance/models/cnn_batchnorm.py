"""Conformance model: a small CNN with one BatchNorm2d on Fashion-MNIST.

conv(1->16, 3x3) - BatchNorm2d - ReLU - maxpool - conv(16->32, 3x3) - ReLU - maxpool - dropout -
linear(32*7*7 -> 10). BatchNorm's running statistics are buffers the shards hold (ADR 0018);
dropout draws from the batch's seed. The data is Debian's dataset-fashion-mnist; the job's
``train_limit`` / ``test_limit`` take a subset (tests/conformance/recipes.py: 3000 / 1000 for
the quick run, all of it for the accuracy measurement of issue 42 item 1).
"""
import torch
import torch.nn.functional as F

import syncopate.torch as st

FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(16)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.dropout = torch.nn.Dropout(0.25)
        self.fc = torch.nn.Linear(32 * 7 * 7, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.view(-1, 1, 28, 28)
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(self.dropout(x.flatten(1)))


def model() -> torch.nn.Module:
    return Net()


def train_dataset(data: st.DataSpec) -> st.FashionMnist:
    return st.FashionMnist(data.dir or FASHION_MNIST, "train", data.train_limit)


def test_dataset(data: st.DataSpec) -> st.FashionMnist:
    return st.FashionMnist(data.dir or FASHION_MNIST, "test", data.test_limit)


loss = F.cross_entropy
