#!/usr/bin/python3
"""A yardstick outside Syncopate's code: the default job's MLP trained by PyTorch alone.

Trains examples/torch/mlp.py's module on Fashion-MNIST with the default job's recipe (global
batch 256, SGD with Nesterov momentum 0.9 at 0.05, 5% linear warmup then a cosine to 0 over the
run, per update as Syncopate's schedule) either in one process (``--processes=1``) or with
DistributedDataParallel over gloo (``--processes=P``: P processes on this machine, each a local
batch of G/P, gradients averaged). Prints examples/s of training (data loading excluded) and the
final test accuracy. Each process runs torch with one intra-op thread, as a Syncopate worker does.

Reads the IDX files itself (numpy), so it depends on nothing of Syncopate's: a peer, not a client.
Not a runtime dependency: Debian's python3-torch (installed by ./dev with libopenblas0-pthread).
Usage: bench/torch_peers.py [--processes=1] [--epochs=8] [--seed=1] [--dir=...]
"""
import argparse
import gzip
import importlib.util
import math
import os
import sys
import time

# One thread per process for OpenBLAS too (it ignores torch.set_num_threads), as in Syncopate's
# workers (libs/pytorch/python_runtime.cc); must be set before torch loads OpenBLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(directory, split):
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(f"{directory}/{prefix}-images-idx3-ubyte.gz").reshape(-1, 784)
    labels = read_idx(f"{directory}/{prefix}-labels-idx1-ubyte.gz")
    return (torch.from_numpy(images.astype(np.float32) / 255.0),
            torch.from_numpy(labels.astype(np.int64)))


def example_model():
    """examples/torch/mlp.py's model(), the module Syncopate trains (imported, not copied)."""
    sys.path.insert(0, os.path.join(ROOT, "python"))  # mlp.py imports syncopate.torch
    spec = importlib.util.spec_from_file_location("mlp_example",
                                                  os.path.join(ROOT, "examples/torch/mlp.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.model()


def learning_rate(update, total, peak=0.05, warmup_fraction=0.05):
    """libs/optim/schedule: linear warmup over round(fraction x run), then a cosine to 0."""
    warmup = round(warmup_fraction * total)
    if update < warmup:
        return peak * (update + 1) / warmup
    t = min(1.0, (update - warmup) / max(1, total - warmup))
    return peak * 0.5 * (1 + math.cos(math.pi * t))


def train(rank, args, result):
    torch.set_num_threads(1)
    distributed = args.processes > 1
    if distributed:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        dist.init_process_group("gloo", rank=rank, world_size=args.processes)
    torch.manual_seed(args.seed)
    model = example_model()
    if distributed:
        model = torch.nn.parallel.DistributedDataParallel(model)
    images, labels = load(args.dir, "train")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    local = args.global_batch // args.processes
    updates_per_epoch = len(labels) // args.global_batch
    total = updates_per_epoch * args.epochs
    generator = torch.Generator().manual_seed(args.seed)
    trained = 0
    seconds = 0.0
    update = 0
    for _ in range(args.epochs):
        order = torch.randperm(len(labels), generator=generator)
        for u in range(updates_per_epoch):
            start = u * args.global_batch + rank * local
            index = order[start:start + local]
            x, y = images[index], labels[index]
            began = time.perf_counter()
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(update, total)
            optimizer.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            seconds += time.perf_counter() - began
            trained += len(index)
            update += 1
    if rank == 0:
        test_images, test_labels = load(args.dir, "test")
        with torch.no_grad():
            accuracy = (model(test_images).argmax(1) == test_labels).float().mean().item()
        # Every process trains the same number of examples in about the same time.
        result["examples_per_second"] = trained * args.processes / seconds
        result["accuracy"] = accuracy
    if distributed:
        dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--global_batch", type=int, default=256)
    parser.add_argument("--port", type=int, default=29517)
    parser.add_argument("--dir", default="/usr/share/datasets/fashion-mnist")
    args = parser.parse_args()
    os.environ["MASTER_PORT"] = str(args.port)
    with mp.Manager() as manager:
        result = manager.dict()
        if args.processes == 1:
            train(0, args, result)
        else:
            mp.spawn(train, args=(args, result), nprocs=args.processes)
        print(f"torch processes={args.processes} epochs={args.epochs} seed={args.seed}: "
              f"{result['examples_per_second']:.0f} examples/s training, "
              f"final test accuracy {100 * result['accuracy']:.2f}%")


if __name__ == "__main__":
    main()
