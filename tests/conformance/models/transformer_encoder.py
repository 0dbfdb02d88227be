"""Conformance model: a small Transformer encoder with tied input/output embeddings.

Each example is 12 tokens from a vocabulary of 24 in which one token occurs twice and every other
token at most once; the class is that repeated token (finding it takes comparing tokens with each
other: attention), but for 10% of the examples (train and test) a random one, so accuracy tops out
near 90%. Token embedding (24 x 32) plus sinusoidal positions, a registered buffer no step changes;
two post-norm encoder layers (2-head self-attention, LayerNorm, a 64-wide feed-forward, dropout
0.1); mean over positions; LayerNorm; and an output layer whose weight *is* the token embedding
(tied: one parameter, two uses, as ``named_parameters()`` lists it once). The data is a pure
function of a fixed seed.
"""
import math

import torch
import torch.nn.functional as F

import syncopate.torch as st

LENGTH = 12
VOCAB = 24
WIDTH = 32
REPEATS = 2
NOISE = 0.1


class Majority(torch.utils.data.Dataset):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, VOCAB, (n,), generator=g)
        tokens = torch.empty(n, LENGTH, dtype=torch.int64)
        for i in range(n):
            others = torch.randperm(VOCAB - 1, generator=g)[:LENGTH - REPEATS]
            others = others + (others >= self.labels[i]).long()  # skip the repeated token
            row = torch.cat([self.labels[i].repeat(REPEATS), others])
            tokens[i] = row[torch.randperm(LENGTH, generator=g)]
        self.tokens = tokens
        noisy = torch.rand(n, generator=g) < NOISE
        self.labels = torch.where(noisy, torch.randint(0, VOCAB, (n,), generator=g), self.labels)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return self.tokens[i], self.labels[i]


def sinusoids(length: int, width: int) -> torch.Tensor:
    """Vaswani et al. (2017)'s fixed positional encodings."""
    position = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    frequency = torch.exp(torch.arange(0, width, 2, dtype=torch.float32) *
                          (-math.log(10000.0) / width))
    table = torch.zeros(length, width)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)
    return table


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, WIDTH)
        self.register_buffer("positions", sinusoids(LENGTH, WIDTH))
        layer = torch.nn.TransformerEncoderLayer(WIDTH, nhead=2, dim_feedforward=64,
                                                 dropout=0.1, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=2,
                                                   enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(WIDTH)
        self.out = torch.nn.Linear(WIDTH, VOCAB)
        self.out.weight = self.embed.weight  # tied input and output embeddings

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens) * math.sqrt(WIDTH) + self.positions
        return self.out(self.norm(self.encoder(h).mean(dim=1)))


def model() -> torch.nn.Module:
    return Net()


def train_dataset(data: st.DataSpec) -> Majority:
    return Majority(data.train_limit or 4000, seed=201)


def test_dataset(data: st.DataSpec) -> Majority:
    return Majority(data.test_limit or 1000, seed=202)


loss = F.cross_entropy
