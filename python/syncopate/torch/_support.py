"""What the shards can hold of a module, checked when the coordinator describes it (private).

The shards hold a module's dense tensors as one float32 vector: every parameter, then every
buffer (ADR 0013, ADR 0018), each tensor apart from the others, dense gradients only. A module
that does not fit that is refused before anything trains, with one line naming the parameter or
buffer and why (``TypeError`` or ``ValueError``: the traceback's last line is the job's reason).
Refusing beats training something else than what the user wrote: every case here would
otherwise train silently differently from plain PyTorch, or fail on the workers with an error
that names nothing of the user's.
"""
from typing import Iterable, List, Tuple

import torch

# Buffers the shards can hold: float32 on the shards, the module's dtype in the module.
BUFFER_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
                 torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)
# Dtypes whose every value survives float32 (the others are checked value by value).
_EXACT_IN_FLOAT32 = (torch.float32, torch.float16, torch.bfloat16, torch.int16, torch.int8,
                     torch.uint8, torch.bool)

SPARSE_GRADIENT = ("takes sparse gradients (torch.nn.Embedding/EmbeddingBag with sparse=True): "
                   "the shards take dense gradients; use sparse=False, or a "
                   "syncopate.torch.ShardedEmbedding for a table whose rows should live on the "
                   "shards")


def check_parameter(name: str, parameter: torch.Tensor) -> None:
    if isinstance(parameter, torch.nn.parameter.UninitializedParameter):
        raise ValueError(f"parameter {name} is uninitialized (a torch.nn.Lazy* module): the "
                         "shards need every shape at start; run one forward pass on an example "
                         "batch inside model()")
    if parameter.dtype != torch.float32:
        raise TypeError(f"parameter {name} is {parameter.dtype}; Syncopate's shards hold float32 "
                        "parameters")


def check_buffer(name: str, buffer: torch.Tensor) -> None:
    if isinstance(buffer, torch.nn.parameter.UninitializedBuffer):
        raise ValueError(f"buffer {name} is uninitialized (a torch.nn.Lazy* module): the shards "
                         "need every shape at start; run one forward pass on an example batch "
                         "inside model()")
    if buffer.dtype not in BUFFER_DTYPES:
        raise TypeError(f"buffer {name} is {buffer.dtype}; Syncopate's shards hold buffers of "
                        "real, integer or bool dtypes only")
    if buffer.dtype in _EXACT_IN_FLOAT32 or buffer.numel() == 0:
        return
    back = buffer.to(torch.float32).to(buffer.dtype)
    lost = back != buffer
    if buffer.is_floating_point():
        lost &= ~(torch.isnan(buffer) & torch.isnan(back))
    if bool(lost.any()):
        value = buffer.reshape(-1)[lost.reshape(-1).nonzero()[0, 0]].item()
        raise ValueError(f"buffer {name} ({buffer.dtype}) holds {value}, which float32 cannot "
                         "hold exactly: the shards hold buffers as float32 (integers up to "
                         "2**24); keep such a constant in a plain attribute, not a buffer")


def check_sparse_modules(model: torch.nn.Module) -> None:
    """Embeddings declared with sparse gradients, refused before any step shows them."""
    for prefix, module in model.named_modules():
        if isinstance(module, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and module.sparse:
            name = f"{prefix}.weight" if prefix else "weight"
            raise TypeError(f"parameter {name} {SPARSE_GRADIENT}")


def check_sparse_gradients(named: Iterable[Tuple[str, torch.Tensor]]) -> None:
    """After a backward pass: a parameter whose gradient came out sparse (e.g. a functional
    ``F.embedding(..., sparse=True)``)."""
    for name, parameter in named:
        if parameter.grad is not None and parameter.grad.layout != torch.strided:
            raise TypeError(f"parameter {name} {SPARSE_GRADIENT}")


def check_no_shared_memory(tensors: List[Tuple[str, str, torch.Tensor]]) -> None:
    """(kind, name, tensor) of every parameter and buffer: no two distinct tensors may share
    memory. The shards hold each tensor apart, so a tie made through storage (``b.data =
    a.data``, two views of one tensor) would silently come undone; a tie made by assigning the
    same Parameter is one tensor and is held once."""
    spans = []
    for index, (kind, name, tensor) in enumerate(tensors):
        if tensor.numel() == 0:
            continue
        extent = 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape,
                                                                      tensor.stride()))
        begin = tensor.data_ptr()
        spans.append((begin, begin + extent * tensor.element_size(), index))
    spans.sort()
    for (_, end, index), (begin, _, other) in zip(spans, spans[1:]):
        if begin < end:
            first, second = sorted((index, other))  # named in the layout's order
            (kind, name, _), (other_kind, other_name, _) = tensors[first], tensors[second]
            raise ValueError(
                f"{kind} {name} and {other_kind} {other_name} share memory but are different "
                "tensors (tied through .data, or views of one tensor): the shards hold each "
                "apart, so the tie would come undone; tie parameters by assigning the same "
                "Parameter (e.g. out.weight = embed.weight)")
