"""A small PyTorch model for tests/unit/pytorch: dense layers over numeric features and a
sum-pooled sharded embedding of two ids per example (negative ids too: keys are any 64 bits)."""
import torch

import syncopate.torch as st


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = st.ShardedEmbedding("ids", dim=4, features="ids", pooling="sum")
        self.fc = torch.nn.Linear(3 + 4, 5)
        self.out = torch.nn.Linear(5, 3)

    def forward(self, x):
        h = torch.cat([x["dense"], self.emb(x["ids"])], dim=1)
        return self.out(torch.relu(self.fc(h)))


class Data(torch.utils.data.Dataset):
    """Random examples, the same for a seed; one at a time (torch's default collate batches)."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.dense = torch.randn(n, 3, generator=g)
        self.ids = torch.randint(-5, 50, (n, 2), generator=g)
        self.y = torch.randint(0, 3, (n,), generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {"dense": self.dense[i], "ids": self.ids[i]}, self.y[i]


def model():
    return Tiny()


def train_dataset(data):
    return Data(40 if data.train_limit == 0 else data.train_limit, 1)


def test_dataset(data):
    return Data(30, 2)


loss = torch.nn.functional.cross_entropy
