"""The default job's MLP (784-256-128-10, ReLU) on Fashion-MNIST, written in plain PyTorch.

Run it through the cluster with ``syncopate local --job=examples/torch/mlp.textproto``: the job
file names this module; the shards hold its parameters, the workers compute its gradients.
"""
import torch

import syncopate.torch as st


def model() -> torch.nn.Module:
    layers = []
    width = 28 * 28
    for hidden in (256, 128):
        linear = torch.nn.Linear(width, hidden)
        # He-uniform weights and zero biases, as the built-in MLP starts (libs/model/mlp.cc), so
        # the two train the same model from the same kind of start.
        torch.nn.init.kaiming_uniform_(linear.weight, nonlinearity="relu")
        torch.nn.init.zeros_(linear.bias)
        layers += [linear, torch.nn.ReLU()]
        width = hidden
    out = torch.nn.Linear(width, 10)
    torch.nn.init.xavier_uniform_(out.weight)
    torch.nn.init.zeros_(out.bias)
    return torch.nn.Sequential(*layers, out)


def train_dataset(data: st.DataSpec) -> st.FashionMnist:
    return st.FashionMnist(data.dir, "train")


def test_dataset(data: st.DataSpec) -> st.FashionMnist:
    return st.FashionMnist(data.dir, "test")


loss = torch.nn.functional.cross_entropy
