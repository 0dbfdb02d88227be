"""The cluster's built-in models as PyTorch modules: the same forward as the C++, in float32.

``Mlp`` is ``libs/model/mlp.{h,cc}`` (job kind MLP); ``CtrModel`` is
``libs/model/ctr_model.{h,cc}`` (WDL, DEEPFM, DCN). They exist so a model trained by the cluster
can be scored outside it: :mod:`syncopate.export` builds them from an export bundle's manifest
(:func:`from_manifest`), fills them from its dense tensors and tables, and writes their
``state_dict()`` and an ONNX graph. Their probabilities agree with the C++ ``Predict`` /
``Evaluate`` within float32 rounding (the sums run in another order; see ``head``).

Parameter names, and the C++ tensors they hold. A C++ tensor ``[rows x cols]`` is column-major
in the flat vector and stored in the export as ``[cols, rows]`` row-major (the same bytes);
``nn.Linear`` keeps ``[outputs, inputs]``, so a weight is the export's transpose:

=========================  =======================  ==================================
PyTorch                    C++ (export shape)       meaning
=========================  =======================  ==================================
``layers.<i>.weight``      ``dense<i>/w`` [in, out]  Mlp layer i (ReLU after all but last)
``layers.<i>.bias``        ``dense<i>/b`` [1, out]
``deep.<i>.weight``        ``deep<i>/w`` [in, out]   CTR deep MLP hidden layer i (ReLU)
``deep.<i>.bias``          ``deep<i>/b`` [1, out]
``deep_out.weight``        ``deep_out/w`` [in, 1]    CTR deep MLP output unit (linear)
``deep_out.bias``          ``deep_out/b`` [1, 1]
``wide_numeric.weight``    ``wide/numeric`` [u, 1]   v, the numerics' linear weights
``fm_numeric``             ``fm/numeric`` [u, e]     DEEPFM: row j is numeric field j's vector, with fm_numeric
``cross.<l>.weight``       ``cross<l>/w`` [d, d]     DCN cross layer l's W_l (transposed); d = 26 e, + u with cross_numeric
``cross.<l>.bias``         ``cross<l>/b`` [1, d]
``embedding``              table ``deep`` (dim e)    CTR field embeddings, U(-0.05, 0.05)
``wide``                   table ``wide`` (dim 1)    CTR linear weights of values and crosses
=========================  =======================  ==================================

(u = 13 numeric inputs, 26 with missing indicators; e = embedding_dim; d = 26 e + u.)
"""
import copy
import dataclasses
from typing import Any, Dict, List, Mapping, Sequence, Tuple, Union

import numpy as np
import torch

from syncopate.keys import CTR_CATEGORICAL, CTR_NUMERIC, as_u64, criteo_values, cross_key
from syncopate.torch.data import ctr_numeric_inputs
from syncopate.torch.embedding import ShardedEmbedding

CTR_KINDS = ("WDL", "DEEPFM", "DCN")
# The deep table's initial rows (libs/model/ctr_model.cc kDeepInitScale).
DEEP_INIT_SCALE = 0.05
# DCN-v2's cross layers cost d^2 each (libs/model/ctr_model.cc kMaxCrossLayers).
MAX_CROSS_LAYERS = 16


@dataclasses.dataclass(frozen=True)
class DenseTensor:
    """One C++ dense tensor and the parameter that holds it.

    ``shape`` is the export's (``[cols, rows]`` of the C++ spec); the parameter holds its
    transpose when ``transpose`` (an ``nn.Linear`` weight or bias), else the same array.
    """
    cpp_name: str
    torch_name: str
    shape: Tuple[int, int]
    transpose: bool = True


def _linear_tensors(cpp: str, torch_prefix: str, inputs: int, outputs: int) -> List[DenseTensor]:
    # W: [rows = outputs x cols = inputs] -> export [inputs, outputs]; b: [outputs x 1] -> [1, out].
    return [DenseTensor(f"{cpp}/w", f"{torch_prefix}.weight", (inputs, outputs)),
            DenseTensor(f"{cpp}/b", f"{torch_prefix}.bias", (1, outputs))]


class _ClusterDense:
    """The mapping between the cluster's dense tensors and the module's parameters."""

    def dense_tensors(self) -> List[DenseTensor]:
        raise NotImplementedError

    def load_cluster_dense(self, dense: Mapping[str, np.ndarray]) -> None:
        """Sets every parameter from the export's tensors (by C++ name, export shape). A tensor
        missing, extra or of another shape is an error naming it."""
        specs = self.dense_tensors()
        names = {s.cpp_name for s in specs}
        extra = [name for name in dense if name not in names]
        if extra:
            raise ValueError(f"{type(self).__name__} has no dense tensor {extra[0]!r}")
        parameters = dict(self.named_parameters())  # type: ignore[attr-defined]
        for spec in specs:
            if spec.cpp_name not in dense:
                raise ValueError(f"the export has no dense tensor {spec.cpp_name!r}")
            value = np.asarray(dense[spec.cpp_name], dtype=np.float32)
            if tuple(value.shape) != spec.shape:
                raise ValueError(f"dense tensor {spec.cpp_name!r} has shape {list(value.shape)}, "
                                 f"expected {list(spec.shape)}")
            parameter = parameters[spec.torch_name]
            tensor = torch.from_numpy(np.ascontiguousarray(value.T if spec.transpose else value))
            with torch.no_grad():
                parameter.copy_(tensor.reshape(parameter.shape))

    def cluster_dense(self) -> Dict[str, np.ndarray]:
        """The module's parameters as the export stores them (C++ names, flat-vector order)."""
        parameters = dict(self.named_parameters())  # type: ignore[attr-defined]
        out: Dict[str, np.ndarray] = {}
        for spec in self.dense_tensors():
            value = parameters[spec.torch_name].detach().numpy()
            value = value.reshape(spec.shape[::-1]).T if spec.transpose else value
            out[spec.cpp_name] = np.ascontiguousarray(value.reshape(spec.shape), dtype=np.float32)
        return out


class Mlp(_ClusterDense, torch.nn.Module):
    """``model::Mlp``: input_dim -> hidden... -> classes, ReLU between layers, linear output.

    ``forward(features)`` takes float32 [N, input_dim] (Fashion-MNIST's pixels in [0, 1], as
    :class:`syncopate.torch.FashionMnist` gives them) and returns the logits [N, classes];
    :meth:`probabilities` is the softmax the evaluator scores.
    """

    def __init__(self, input_dim: int = 784, hidden: Sequence[int] = (256, 128),
                 classes: int = 10) -> None:
        super().__init__()
        if input_dim <= 0 or classes <= 0:
            raise ValueError(f"MLP needs input_dim > 0 and classes > 0, got {input_dim} and "
                             f"{classes}")
        for i, width in enumerate(hidden):
            if width <= 0:
                raise ValueError(f"MLP hidden layer {i} needs a positive width, got {width}")
        widths = [int(input_dim), *map(int, hidden), int(classes)]
        self.input_dim = widths[0]
        self.hidden = tuple(widths[1:-1])
        self.classes = widths[-1]
        self.layers = torch.nn.ModuleList(
            torch.nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))

    @classmethod
    def from_manifest(cls, model: Mapping[str, Any]) -> "Mlp":
        """From the manifest's ``model`` section: ``input_dim``, ``hidden``, ``classes``."""
        return cls(int(model.get("input_dim", 784)), list(model.get("hidden", [])),
                   int(model.get("classes", 10)))

    def dense_tensors(self) -> List[DenseTensor]:
        specs: List[DenseTensor] = []
        for i, layer in enumerate(self.layers):
            specs += _linear_tensors(f"dense{i}", f"layers.{i}", layer.in_features,
                                     layer.out_features)
        return specs

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        x = features
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = torch.relu(x)
        return x

    def probabilities(self, features: torch.Tensor) -> torch.Tensor:
        """Softmax of the logits (computed in double, as ``Mlp::Evaluate`` sums in double)."""
        return torch.softmax(self.forward(features).double(), dim=1).float()


class CtrModel(_ClusterDense, torch.nn.Module):
    """``model::CtrModel``: wide & deep (WDL), DeepFM (DEEPFM) or DCN-v2 (DCN) on Criteo's 13
    numeric and 26 categorical columns.

    ``forward(batch)`` takes the batch :class:`syncopate.torch.Criteo` gives,
    ``{"numeric": float32 [N, 13] (NaN = missing), "categorical": int64 [N, 26]}`` (each value
    already its field's key, ``syncopate.keys.criteo_keys``), and returns the click logit [N];
    :meth:`probability` is its sigmoid. It runs in two steps so the dense part exports alone:
    :meth:`lookup` (keys -> table rows, in Python) and :meth:`head` (pure dense math).
    """

    def __init__(self, kind: str, embedding_dim: int = 16, hidden: Sequence[int] = (),
                 crosses: Sequence[Sequence[int]] = (), cross_layers: int = 0,
                 missing_indicators: bool = False, fm_numeric: bool = False,
                 cross_numeric: bool = False) -> None:
        super().__init__()
        _check_ctr_options(kind, embedding_dim, hidden, crosses, cross_layers)
        self.kind = kind
        self.embedding_dim = int(embedding_dim)
        self.hidden = tuple(int(h) for h in hidden)
        self.crosses = tuple((int(a), int(b)) for a, b in crosses)
        self.cross_layers = int(cross_layers)
        self.missing_indicators = bool(missing_indicators)
        # DEEPFM: the numeric inputs are FM fields too (model.fm_fields CATEGORICAL_AND_NUMERIC,
        # the layout before ADR 0020); by default the FM pairs the categorical fields only.
        if fm_numeric and kind != "DEEPFM":
            raise ValueError("fm_numeric is only for DEEPFM")
        self.fm_numeric_fields = bool(fm_numeric)
        # DCN: the cross layers take the numeric inputs too (model.cross_fields
        # CATEGORICAL_AND_NUMERIC, the layout before ADR 0021); by default they cross the field
        # embeddings only and the numerics join the MLP after them.
        if cross_numeric and kind != "DCN":
            raise ValueError("cross_numeric is only for DCN")
        self.cross_numeric = bool(cross_numeric)
        self.numeric_inputs = 2 * CTR_NUMERIC if missing_indicators else CTR_NUMERIC
        self.input_dim = CTR_CATEGORICAL * self.embedding_dim + self.numeric_inputs
        self.cross_dim = self.input_dim if cross_numeric else CTR_CATEGORICAL * self.embedding_dim
        # Both tables are read with the fields' keys; "wide" also with the crosses' keys.
        self.embedding = ShardedEmbedding("deep", self.embedding_dim, features="categorical",
                                          init_scale=DEEP_INIT_SCALE)
        self.wide = ShardedEmbedding("wide", 1, features="categorical", init_scale=0.0)
        widths = [self.input_dim, *self.hidden]
        self.deep = torch.nn.ModuleList(
            torch.nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.deep_out = torch.nn.Linear(widths[-1], 1)
        self.wide_numeric = torch.nn.Linear(self.numeric_inputs, 1, bias=False)
        if self.fm_numeric_fields:
            self.fm_numeric = torch.nn.Parameter(
                torch.zeros(self.numeric_inputs, self.embedding_dim))
        self.cross = torch.nn.ModuleList(
            torch.nn.Linear(self.cross_dim, self.cross_dim) for _ in range(self.cross_layers))

    @classmethod
    def from_manifest(cls, model: Mapping[str, Any]) -> "CtrModel":
        """From the manifest's ``model`` section: ``kind``, ``embedding_dim``, ``hidden``,
        ``crosses`` (pairs of 0-based fields), ``cross_layers``, ``missing_indicators``,
        ``fm_numeric``, ``cross_numeric``."""
        return cls(str(model["kind"]), int(model.get("embedding_dim", 16)),
                   list(model.get("hidden", [])), [_pair(c) for c in model.get("crosses", [])],
                   int(model.get("cross_layers", 0)), bool(model.get("missing_indicators", False)),
                   bool(model.get("fm_numeric", False)), bool(model.get("cross_numeric", False)))

    def dense_tensors(self) -> List[DenseTensor]:
        # CtrModel::tensors()' order: the deep MLP, "wide/numeric", then "fm/numeric" or the
        # cross layers.
        specs: List[DenseTensor] = []
        for i, layer in enumerate(self.deep):
            specs += _linear_tensors(f"deep{i}", f"deep.{i}", layer.in_features,
                                     layer.out_features)
        specs += _linear_tensors("deep_out", "deep_out", self.deep_out.in_features, 1)
        # "wide/numeric" is [1 x u]: export [u, 1], the transpose of Linear(u, 1)'s [1, u].
        specs.append(DenseTensor("wide/numeric", "wide_numeric.weight", (self.numeric_inputs, 1)))
        if self.fm_numeric_fields:
            # "fm/numeric" is [e x u], column j numeric field j's vector: export [u, e], row j.
            specs.append(DenseTensor("fm/numeric", "fm_numeric",
                                     (self.numeric_inputs, self.embedding_dim), transpose=False))
        for l in range(self.cross_layers):
            specs += _linear_tensors(f"cross{l}", f"cross.{l}", self.cross_dim, self.cross_dim)
        return specs

    # --- the two steps -----------------------------------------------------------------------
    def wide_keys(self, categorical: torch.Tensor) -> torch.Tensor:
        """The "wide" table's keys of each example, int64 [N, 26 + crosses]: the fields' keys,
        then each cross's ``CrossKey`` of the two fields' values (``BatchKeys::Collect``). The
        values come back from the keys (:func:`syncopate.keys.criteo_values`)."""
        if not self.crosses:
            return categorical
        values = criteo_values(as_u64(categorical.numpy()))
        keys = np.stack([cross_key(c, values[:, a], values[:, b])
                         for c, (a, b) in enumerate(self.crosses)], axis=1)
        return torch.cat([categorical, torch.from_numpy(keys.view(np.int64))], dim=1)

    def lookup(self, batch: Mapping[str, Any]) -> Tuple[torch.Tensor, torch.Tensor]:
        """The table rows of a batch: deep rows float32 [N, 26, embedding_dim] and wide rows
        float32 [N, 26 + crosses] (the fields' weights, then the crosses')."""
        categorical = torch.as_tensor(batch["categorical"])
        if categorical.dtype != torch.int64 or categorical.dim() != 2 or \
                categorical.shape[1] != CTR_CATEGORICAL:
            raise ValueError(f"batch['categorical'] must be int64 [N, {CTR_CATEGORICAL}] keys, "
                             f"got {categorical.dtype} {list(categorical.shape)}")
        deep_rows = self.embedding(categorical)
        wide_rows = self.wide(self.wide_keys(categorical)).squeeze(2)
        return deep_rows, wide_rows

    def head(self, numeric: torch.Tensor, deep_rows: torch.Tensor,
             wide_rows: torch.Tensor) -> torch.Tensor:
        """The logit [N] from the raw numerics (float32 [N, 13], NaN = missing) and the rows
        :meth:`lookup` gives: ``CtrModel::Forward``, term by term.

        The float32 sums run in torch's order, not Eigen's, so a logit may differ from the C++
        in the last bits; the FM's squares are summed in double as the C++ sums them (it
        subtracts two close numbers).
        """
        n = numeric.shape[0]
        x = ctr_numeric_inputs(numeric, self.missing_indicators)
        x0 = torch.cat([deep_rows.reshape(n, -1), x], dim=1)
        h = x0
        if self.cross_layers:
            # DCN-v2: c_(l+1) = c0 (.) (W_l c_l + b_l) + c_l over c0, the embeddings (x0 with
            # cross_numeric); the MLP then reads [c_L | x] (c_L).
            c0 = x0 if self.cross_numeric else deep_rows.reshape(n, -1)
            c = c0
            for layer in self.cross:
                c = c0 * layer(c) + c
            h = c if self.cross_numeric else torch.cat([c, x], dim=1)
        for layer in self.deep:
            h = torch.relu(layer(h))
        logit = self.deep_out(h).squeeze(1)
        # The linear part: v . x plus one weight per categorical value and per crossed pair.
        logit = logit + (self.wide_numeric(x).squeeze(1) + wide_rows.sum(dim=1))
        if self.kind == "DEEPFM":
            logit = logit + self._fm(x, deep_rows)
        return logit

    def _fm(self, x: torch.Tensor, deep_rows: torch.Tensor) -> torch.Tensor:
        """sum_(i<j) <u_i, u_j> = 1/2 (|sum_i u_i|^2 - sum_i |u_i|^2) (Rendle, 2010) over the 26
        field rows and, with ``fm_numeric``, the numeric fields' x_j n_j
        (``CtrModel::ForwardFm``)."""
        total = deep_rows.sum(dim=1)
        squares = deep_rows.pow(2).sum(dim=2).double().sum(dim=1)
        if self.fm_numeric_fields:
            total = total + x @ self.fm_numeric
            squares = squares + \
                (self.fm_numeric.pow(2).sum(dim=1) * x.pow(2)).sum(dim=1).double()
        return (0.5 * (total.pow(2).sum(dim=1).double() - squares)).float()

    def forward(self, batch: Mapping[str, Any]) -> torch.Tensor:
        deep_rows, wide_rows = self.lookup(batch)
        return self.head(torch.as_tensor(batch["numeric"]), deep_rows, wide_rows)

    def probability(self, batch: Mapping[str, Any]) -> torch.Tensor:
        """The click probability [N]: ``CtrModel::Predict``'s sigmoid, in double."""
        deep_rows, wide_rows = self.lookup(batch)
        return self.head_probability(torch.as_tensor(batch["numeric"]), deep_rows, wide_rows)

    def head_probability(self, numeric: torch.Tensor, deep_rows: torch.Tensor,
                         wide_rows: torch.Tensor) -> torch.Tensor:
        """:meth:`head`'s sigmoid, in double as ``CtrModel::Predict``: the ONNX graph."""
        return torch.sigmoid(self.head(numeric, deep_rows, wide_rows).double()).float()


def _pair(cross) -> Tuple[int, int]:
    """A cross as the manifest gives it: ``{"first": a, "second": b}`` (the proto3 JSON the
    C++ side writes) or ``[a, b]``."""
    if isinstance(cross, Mapping):
        return int(cross.get("first", 0)), int(cross.get("second", 0))
    a, b = cross
    return int(a), int(b)


def _check_ctr_options(kind: str, embedding_dim: int, hidden: Sequence[int],
                       crosses: Sequence[Sequence[int]], cross_layers: int) -> None:
    """``CtrModel::Create``'s checks, with its messages."""
    if kind not in CTR_KINDS:
        raise ValueError(f"CTR model kind must be one of {', '.join(CTR_KINDS)}, got {kind!r}")
    for pair in crosses:
        a, b = (int(v) for v in pair)
        if not (0 <= a < CTR_CATEGORICAL and 0 <= b < CTR_CATEGORICAL) or a == b:
            raise ValueError(f"CTR model cross of fields {a} and {b} needs two different fields "
                             f"in [0, {CTR_CATEGORICAL})")
    if embedding_dim <= 0:
        raise ValueError(f"CTR model needs embedding_dim > 0, got {embedding_dim}")
    for i, width in enumerate(hidden):
        if width <= 0:
            raise ValueError(f"CTR model hidden layer {i} needs a positive width, got {width}")
    if kind == "DCN" and not 1 <= cross_layers <= MAX_CROSS_LAYERS:
        raise ValueError(f"DCN needs cross_layers in [1, {MAX_CROSS_LAYERS}], got {cross_layers}")
    if kind != "DCN" and cross_layers != 0:
        raise ValueError("cross_layers is only for DCN")


BuiltinModel = Union[Mlp, CtrModel]


class OnnxGraph(torch.nn.Module):
    """The dense graph of a built-in model, as ``torch.onnx.export`` takes it: the MLP whole
    (features -> probabilities), a CTR model's head after the lookups (numeric, deep rows, wide
    rows -> probability). The tables stay outside: ONNX has no op for a key-value lookup."""

    def __init__(self, model: BuiltinModel) -> None:
        super().__init__()
        # The graph holds the model without its tables (a shallow copy sharing the dense
        # parameters): the lookups stay outside, and torch 1.13's tracer detaches every
        # state-dict value, which a table's _extra_state (a dict) is not.
        dense = copy.copy(model)
        dense._modules = {name: module for name, module in model._modules.items()
                          if not isinstance(module, ShardedEmbedding)}
        self.model = dense
        if isinstance(model, Mlp):
            self.input_names = ["features"]
            self.output_names = ["probabilities"]
        else:
            self.input_names = ["numeric", "deep_rows", "wide_rows"]
            self.output_names = ["probability"]

    def example_inputs(self, n: int = 2) -> Tuple[torch.Tensor, ...]:
        model = self.model
        if isinstance(model, Mlp):
            return (torch.zeros(n, model.input_dim),)
        return (torch.zeros(n, CTR_NUMERIC), torch.zeros(n, CTR_CATEGORICAL, model.embedding_dim),
                torch.zeros(n, CTR_CATEGORICAL + len(model.crosses)))

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        if isinstance(self.model, Mlp):
            return self.model.probabilities(*inputs)
        return self.model.head_probability(*inputs)


def from_manifest(model: Mapping[str, Any]) -> BuiltinModel:
    """The built-in model an export manifest's ``model`` section describes (kind MLP, WDL,
    DEEPFM or DCN), with untrained parameters."""
    kind = model.get("kind")
    if kind == "MLP":
        return Mlp.from_manifest(model)
    if kind in CTR_KINDS:
        return CtrModel.from_manifest(model)
    raise ValueError(f"model kind {kind!r} is not a built-in model (MLP, {', '.join(CTR_KINDS)})")
