"""Conformance model: an LSTM sequence classifier on synthetic token sequences.

Each example is 20 tokens from a vocabulary of 10; tokens 1, 2 and 3 are markers, each present 0 to
5 times, and the class is the marker present most often (one always leads), so the model must count
along the sequence; 10% of the labels (train and test) are replaced by a random class, so accuracy
tops out near 93% instead of saturating at 100%. Embedding(10, 16) - LSTM(16 -> 32) - the last
step's hidden state - linear(32 -> 3). The data is a pure function of a fixed seed (the job's seed
changes only the initialisation and the order), one example at a time through torch's default
collate.
"""
import torch
import torch.nn.functional as F

import syncopate.torch as st

LENGTH = 20
VOCAB = 10
MARKERS = (1, 2, 3)
NOISE = 0.1


class Sequences(torch.utils.data.Dataset):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        tokens = torch.randint(len(MARKERS) + 1, VOCAB, (n, LENGTH), generator=g)
        counts = torch.randint(0, 5, (n, len(MARKERS)), generator=g)
        labels = torch.randint(0, len(MARKERS), (n,), generator=g)
        counts[torch.arange(n), labels] = counts.max(dim=1).values + 1  # one marker leads
        for i in range(n):
            markers = torch.repeat_interleave(torch.arange(1, len(MARKERS) + 1), counts[i])
            places = torch.randperm(LENGTH, generator=g)[:len(markers)]
            tokens[i, places] = markers
        noisy = torch.rand(n, generator=g) < NOISE
        random = torch.randint(0, len(MARKERS), (n,), generator=g)
        self.tokens = tokens
        self.labels = torch.where(noisy, random, labels)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return self.tokens[i], self.labels[i]


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, 16)
        self.lstm = torch.nn.LSTM(16, 32, batch_first=True)
        self.out = torch.nn.Linear(32, len(MARKERS))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        states, _ = self.lstm(self.embed(tokens))
        return self.out(states[:, -1])


def model() -> torch.nn.Module:
    return Net()


def train_dataset(data: st.DataSpec) -> Sequences:
    return Sequences(data.train_limit or 4000, seed=101)


def test_dataset(data: st.DataSpec) -> Sequences:
    return Sequences(data.test_limit or 1000, seed=102)


loss = F.cross_entropy
