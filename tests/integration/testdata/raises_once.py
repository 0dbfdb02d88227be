"""examples/torch/mlp.py whose training data fails once: the first worker that reads a batch
raises (and leaves a marker beside this file), every later read succeeds. The worker that raised
must exit with the traceback's last line while the job goes on without it."""
import os

import torch

import syncopate.torch as st

MARKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "raised")


def model():
    return torch.nn.Sequential(torch.nn.Linear(784, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))


class FailsOnce(st.FashionMnist):
    def __getitems__(self, indices):
        # The coordinator's start-up check reads two examples; workers read whole batches.
        if len(indices) > 2 and not os.path.exists(MARKER):
            open(MARKER, "w").close()
            raise RuntimeError("simulated data error in this worker")
        return super().__getitems__(indices)


def train_dataset(data):
    return FailsOnce(data.dir, "train", data.train_limit)


def test_dataset(data):
    return st.FashionMnist(data.dir, "test", data.test_limit)


loss = torch.nn.functional.cross_entropy
