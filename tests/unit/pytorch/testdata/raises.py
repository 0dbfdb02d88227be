"""A model whose forward pass raises on any batch after the first two examples: describe
(which runs one step on examples 0 and 1) passes, a worker's training step fails."""
import torch


class Fragile(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(2, 2)

    def forward(self, x):
        if len(x) > 2:
            raise ValueError("the model cannot take this batch")
        return self.fc(x)


class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        return torch.tensor([float(i), 1.0]), torch.tensor(i % 2)


def model():
    return Fragile()


def train_dataset(data):
    return Data()


def test_dataset(data):
    return Data()


loss = torch.nn.functional.cross_entropy
