"""A PyTorch job's module for tests/python/test_export.py: what an export must carry out of the
cluster. One table read by two modules (pooled and not), a second table of zeros, BatchNorm's
buffers (an int64 one too) and a weight tied between two layers."""
import torch

import syncopate.torch as st


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ids_bag = st.ShardedEmbedding("ids", dim=4, features="ids", pooling="mean")
        self.ids_first = st.ShardedEmbedding("ids", dim=4, features="ids")
        self.tags = st.ShardedEmbedding("tags", dim=2, features="tags", pooling="sum",
                                        init_scale=0.0)
        self.fc = torch.nn.Linear(3 + 4 + 4 + 2, 5)
        self.bn = torch.nn.BatchNorm1d(5)
        self.encode = torch.nn.Linear(5, 5, bias=False)
        self.decode = torch.nn.Linear(5, 5)
        self.decode.weight = self.encode.weight  # tied: one parameter, two state-dict names

    def forward(self, x):
        first = self.ids_first(x["ids"][:, 0].contiguous())
        h = torch.cat([x["dense"], self.ids_bag(x["ids"]), first, self.tags(x["tags"])], dim=1)
        h = torch.relu(self.bn(self.fc(h)))
        return self.decode(torch.relu(self.encode(h)))


class Data(torch.utils.data.Dataset):
    """Random examples; ids include negative ones (keys >= 2**63)."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.dense = torch.randn(n, 3, generator=g)
        self.ids = torch.randint(-6, 30, (n, 3), generator=g)
        self.tags = torch.randint(0, 8, (n, 2), generator=g)
        self.y = torch.randint(0, 5, (n,), generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {"dense": self.dense[i], "ids": self.ids[i], "tags": self.tags[i]}, self.y[i]


def model():
    return Net()


def train_dataset(data):
    return Data(40, 1)


def test_dataset(data):
    return Data(30, 2)


loss = torch.nn.functional.cross_entropy
