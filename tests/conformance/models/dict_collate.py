"""Conformance model: a dataset of dicts with variable-length sequences and a custom ``collate``.

Each example is ``{"tokens": int64[length], "label": int}`` with a length from 3 to 12 and
tokens 1..30; the class is 1 when most tokens are at most 15. torch's default collate cannot
stack sequences of different lengths, so this module defines ``collate(examples)``, what a
PyTorch user passes as ``DataLoader(collate_fn=...)``: it pads to the batch's longest sequence
with 0 and returns ``({"tokens", "mask"}, labels)``. Embedding(31, 16, padding_idx=0) - mean over
the unpadded positions - linear(16 -> 32) - ReLU - linear(32 -> 2).
"""
from typing import Dict, List

import torch
import torch.nn.functional as F

import syncopate.torch as st

VOCAB = 31  # 0 pads


class Sentences(torch.utils.data.Dataset):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        lengths = torch.randint(3, 13, (n,), generator=g)
        bias = torch.rand(n, generator=g)  # each example leans to low or high tokens
        self.examples = []
        for i in range(n):
            low = torch.rand(int(lengths[i]), generator=g) < bias[i]
            tokens = torch.where(low, torch.randint(1, 16, (int(lengths[i]),), generator=g),
                                 torch.randint(16, VOCAB, (int(lengths[i]),), generator=g))
            label = int(2 * int(low.sum()) > len(tokens))
            self.examples.append({"tokens": tokens, "label": label})

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i: int) -> Dict:
        return self.examples[i]


def collate(examples: List[Dict]):
    """Pads a batch of examples: ``({"tokens": [B, L], "mask": bool [B, L]}, labels [B])``."""
    longest = max(len(e["tokens"]) for e in examples)
    tokens = torch.zeros(len(examples), longest, dtype=torch.int64)
    for row, e in enumerate(examples):
        tokens[row, :len(e["tokens"])] = e["tokens"]
    labels = torch.tensor([e["label"] for e in examples], dtype=torch.int64)
    return {"tokens": tokens, "mask": tokens != 0}, labels


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, 16, padding_idx=0)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                       torch.nn.Linear(32, 2))

    def forward(self, batch) -> torch.Tensor:
        mask = batch["mask"].unsqueeze(2).float()
        pooled = (self.embed(batch["tokens"]) * mask).sum(1) / mask.sum(1)
        return self.mlp(pooled)


def model() -> torch.nn.Module:
    return Net()


def train_dataset(data: st.DataSpec) -> Sentences:
    return Sentences(data.train_limit or 4000, seed=601)


def test_dataset(data: st.DataSpec) -> Sentences:
    return Sentences(data.test_limit or 1000, seed=602)


loss = F.cross_entropy
