#include "libs/model/ctr_model.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>

#include "Eigen/Core"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "libs/common/splitmix64.h"
#include "libs/common/status_macros.h"

namespace syncopate::model {
namespace {

using ::syncopate::v1::Initializer;
using MatrixMap = Eigen::Map<Eigen::MatrixXf>;
using ConstMatrixMap = Eigen::Map<const Eigen::MatrixXf>;
using VectorMap = Eigen::Map<Eigen::VectorXf>;
using ConstVectorMap = Eigen::Map<const Eigen::VectorXf>;

// The numeric inputs: the 13 transformed columns, then their 13 missing indicators if asked.
int NumericInputs(const CtrModelOptions& options) {
  return options.missing_indicators ? 2 * kCtrNumeric : kCtrNumeric;
}

// Counts span orders of magnitude (Criteo's integer columns are mostly counts); log1p keeps
// their scale comparable to the embeddings'. Missing (NaN) contributes nothing here; with
// missing indicators its column's indicator says it was missing.
float TransformNumeric(float x) { return std::isnan(x) ? 0.0f : std::log1p(std::max(x, 0.0f)); }

// The embeddings start small so that the deep part's first predictions are close to the wide
// part's, and large enough to break the symmetry between rows.
constexpr double kDeepInitScale = 0.05;

// Each DCN cross layer costs input_dim^2 parameters and multiply-adds per example; beyond a few
// layers DCN-v2 reports no gain.
constexpr int kMaxCrossLayers = 16;

}  // namespace

uint64_t CategoricalKey(int field, uint64_t value) {
  // Mixing the field first keeps (field, value) pairs whose raw XOR would collide apart.
  return DeriveSeed(value, static_cast<uint64_t>(field) + 1);
}

uint64_t CrossKey(int cross, uint64_t a, uint64_t b) {
  // Outside the fields' key space (field ids >= 26), and order-sensitive in (a, b).
  return CategoricalKey(kCtrCategorical + cross, SplitMix64(a) ^ b);
}

void BatchKeys::Collect(const CtrBatchView& batch, std::span<const FieldPair> crosses) {
  keys.clear();
  position.resize(static_cast<size_t>(batch.size) * kCtrCategorical);
  absl::flat_hash_map<uint64_t, int32_t> seen;
  seen.reserve(static_cast<size_t>(batch.size) * kCtrCategorical);
  for (int64_t j = 0; j < batch.size; ++j) {
    for (int f = 0; f < kCtrCategorical; ++f) {
      const uint64_t key = CategoricalKey(f, batch.categorical[j * kCtrCategorical + f]);
      const auto [it, inserted] = seen.try_emplace(key, static_cast<int32_t>(keys.size()));
      if (inserted) keys.push_back(key);
      position[j * kCtrCategorical + f] = it->second;
    }
  }
  wide_keys = keys;
  const size_t c = crosses.size();
  cross_position.resize(static_cast<size_t>(batch.size) * c);
  for (int64_t j = 0; j < batch.size; ++j) {
    const uint64_t* values = batch.categorical + j * kCtrCategorical;
    for (size_t x = 0; x < c; ++x) {
      const uint64_t key =
          CrossKey(static_cast<int>(x), values[crosses[x].first], values[crosses[x].second]);
      const auto [it, inserted] = seen.try_emplace(key, static_cast<int32_t>(wide_keys.size()));
      if (inserted) wide_keys.push_back(key);
      cross_position[j * c + x] = it->second;
    }
  }
}

absl::StatusOr<CtrModel> CtrModel::Create(CtrModelOptions options) {
  for (const FieldPair& cross : options.crosses) {
    if (cross.first < 0 || cross.first >= kCtrCategorical || cross.second < 0 ||
        cross.second >= kCtrCategorical || cross.first == cross.second) {
      return absl::InvalidArgumentError(
          absl::StrCat("CTR model cross of fields ", cross.first, " and ", cross.second,
                       " needs two different fields in [0, ", kCtrCategorical, ")"));
    }
  }
  if (options.embedding_dim <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CTR model needs embedding_dim > 0, got ", options.embedding_dim));
  }
  for (size_t i = 0; i < options.hidden.size(); ++i) {
    if (options.hidden[i] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "CTR model hidden layer ", i, " needs a positive width, got ", options.hidden[i]));
    }
  }
  const bool dcn = options.architecture == CtrArchitecture::kDcn;
  if (dcn && (options.cross_layers < 1 || options.cross_layers > kMaxCrossLayers)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DCN needs cross_layers in [1, ", kMaxCrossLayers, "], got ", options.cross_layers));
  }
  if (!dcn && options.cross_layers != 0) {
    return absl::InvalidArgumentError("cross_layers is only for DCN");
  }
  if (options.fm_numeric && options.architecture != CtrArchitecture::kDeepFm) {
    return absl::InvalidArgumentError("fm_numeric is only for DeepFM");
  }
  if (options.cross_numeric && !dcn) {
    return absl::InvalidArgumentError("cross_numeric is only for DCN");
  }
  std::vector<int> widths = options.hidden;
  widths.push_back(1);
  int64_t offset = 0;
  std::vector<DenseLayer> layers = LayOutDenseLayers(
      kCtrCategorical * options.embedding_dim + NumericInputs(options), widths, offset);
  return CtrModel(options, std::move(layers), offset);
}

CtrModel::CtrModel(const CtrModelOptions& options, std::vector<DenseLayer> layers,
                   int64_t wide_offset)
    : architecture_(options.architecture),
      embedding_dim_(options.embedding_dim),
      numeric_inputs_(NumericInputs(options)),
      input_dim_(kCtrCategorical * options.embedding_dim + numeric_inputs_),
      cross_dim_(options.cross_numeric ? input_dim_ : kCtrCategorical * options.embedding_dim),
      layers_(std::move(layers)),
      kernels_(&MlpKernelsFor(options.isa_level)),
      wide_offset_(wide_offset),
      crosses_(options.crosses) {
  Initializer zeros;
  zeros.set_kind(Initializer::ZEROS);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const bool output = i + 1 == layers_.size();
    const std::string name = output ? "deep_out" : absl::StrCat("deep", i);
    Initializer weight_init;
    // He for ReLU layers; Glorot for the linear output.
    weight_init.set_kind(output ? Initializer::GLOROT_UNIFORM : Initializer::HE_UNIFORM);
    weight_init.set_fan_in(layers_[i].inputs);
    weight_init.set_fan_out(layers_[i].outputs);
    tensors_.push_back({.name = name + "/w",
                        .rows = layers_[i].outputs,
                        .cols = layers_[i].inputs,
                        .init = weight_init});
    tensors_.push_back({.name = name + "/b", .rows = layers_[i].outputs, .cols = 1, .init = zeros});
  }
  tensors_.push_back({.name = "wide/numeric", .rows = 1, .cols = numeric_inputs_, .init = zeros});
  int64_t offset = wide_offset_ + numeric_inputs_;
  if (architecture_ == CtrArchitecture::kDeepFm && options.fm_numeric) {
    // The numeric fields' FM vectors start like the embedding rows they meet in the FM.
    Initializer fm_init;
    fm_init.set_kind(Initializer::UNIFORM);
    fm_init.set_scale(kDeepInitScale);
    fm_offset_ = offset;
    tensors_.push_back(
        {.name = "fm/numeric", .rows = embedding_dim_, .cols = numeric_inputs_, .init = fm_init});
    offset += static_cast<int64_t>(embedding_dim_) * numeric_inputs_;
  }
  if (architecture_ == CtrArchitecture::kDcn) {
    // Each cross layer maps cross_dim -> cross_dim (c_{l+1} = c_0 ⊙ (W_l·c_l + b_l) + c_l).
    const std::vector<int> widths(options.cross_layers, cross_dim_);
    cross_ = LayOutDenseLayers(cross_dim_, widths, offset);
    for (int l = 0; l < options.cross_layers; ++l) {
      // Glorot, as DCN-v2's reference (TensorFlow Recommenders' Cross layer) initialises W.
      Initializer weight_init;
      weight_init.set_kind(Initializer::GLOROT_UNIFORM);
      weight_init.set_fan_in(cross_dim_);
      weight_init.set_fan_out(cross_dim_);
      const std::string name = absl::StrCat("cross", l);
      tensors_.push_back(
          {.name = name + "/w", .rows = cross_dim_, .cols = cross_dim_, .init = weight_init});
      tensors_.push_back({.name = name + "/b", .rows = cross_dim_, .cols = 1, .init = zeros});
    }
    cross_x_.resize(cross_.size());
    cross_z_.resize(cross_.size());
  }
  num_parameters_ = offset;
  activations_.resize(layers_.size());
}

std::vector<v1::EmbeddingTableSpec> CtrModel::tables() const {
  std::vector<v1::EmbeddingTableSpec> tables(2);
  tables[kDeepTable].set_name("deep");
  tables[kDeepTable].set_dim(embedding_dim_);
  tables[kDeepTable].mutable_init()->set_kind(Initializer::UNIFORM);
  tables[kDeepTable].mutable_init()->set_scale(kDeepInitScale);
  tables[kWideTable].set_name("wide");
  tables[kWideTable].set_dim(1);
  tables[kWideTable].mutable_init()->set_kind(Initializer::ZEROS);
  return tables;
}

absl::Status CtrModel::Validate(std::span<const float> params, const CtrBatchView& batch,
                                const BatchKeys& keys, std::span<const float> deep_rows,
                                std::span<const float> wide_rows) const {
  if (std::cmp_not_equal(params.size(), num_parameters_)) {
    return absl::InvalidArgumentError(
        absl::StrCat("params has ", params.size(), " floats; the model has ", num_parameters_));
  }
  if (batch.size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("batch has ", batch.size, " examples"));
  }
  if (keys.position.size() != static_cast<size_t>(batch.size) * kCtrCategorical ||
      keys.cross_position.size() != static_cast<size_t>(batch.size) * crosses_.size()) {
    return absl::InvalidArgumentError("batch keys were collected for another batch or model");
  }
  if (deep_rows.size() != keys.keys.size() * static_cast<size_t>(embedding_dim_) ||
      wide_rows.size() != keys.wide_keys.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows for ", keys.keys.size(), " + ", keys.wide_keys.size(), " keys have ",
                     deep_rows.size(), " deep and ", wide_rows.size(), " wide floats"));
  }
  return absl::OkStatus();
}

void CtrModel::Forward(const float* params, const CtrBatchView& batch, const BatchKeys& keys,
                       const float* deep_rows, const float* wide_rows) {
  const int64_t n = batch.size;
  const size_t e = static_cast<size_t>(embedding_dim_);
  inputs_.resize(static_cast<size_t>(input_dim_) * n);
  const int u = numeric_inputs_;
  numeric_.resize(static_cast<size_t>(u) * n);
  logits_.resize(n);
  for (int64_t j = 0; j < n; ++j) {
    float* column = inputs_.data() + j * input_dim_;
    for (int f = 0; f < kCtrCategorical; ++f) {
      const int32_t p = keys.position[j * kCtrCategorical + f];
      std::copy_n(deep_rows + p * e, e, column + f * e);
    }
    float* numeric = numeric_.data() + j * u;
    for (int i = 0; i < kCtrNumeric; ++i) {
      const float raw = batch.numeric[j * kCtrNumeric + i];
      numeric[i] = TransformNumeric(raw);
      if (u > kCtrNumeric) numeric[kCtrNumeric + i] = std::isnan(raw) ? 1.0f : 0.0f;
    }
    std::copy_n(numeric, u, column + kCtrCategorical * e);
  }
  // DCN-v2's cross layers over the top cross_dim rows: c_(l+1) = c0 (.) (W_l c_l + b_l) + c_l;
  // the rows below (the numerics, without cross_numeric) pass through to the MLP.
  const int crossed = cross_dim_;
  const auto c0 = ConstMatrixMap(inputs_.data(), input_dim_, n).topRows(crossed);
  const float* in = inputs_.data();
  for (size_t l = 0; l < cross_.size(); ++l) {
    cross_z_[l].resize(static_cast<size_t>(crossed) * n);
    cross_x_[l].resize(static_cast<size_t>(input_dim_) * n);
    MatrixMap z(cross_z_[l].data(), crossed, n);
    const ConstMatrixMap x(in, input_dim_, n);
    z.noalias() =
        ConstMatrixMap(params + cross_[l].weight_offset, crossed, crossed) * x.topRows(crossed);
    z.colwise() += ConstVectorMap(params + cross_[l].bias_offset, crossed);
    MatrixMap out(cross_x_[l].data(), input_dim_, n);
    out.topRows(crossed) = c0.cwiseProduct(z) + x.topRows(crossed);
    out.bottomRows(input_dim_ - crossed) = x.bottomRows(input_dim_ - crossed);
    in = cross_x_[l].data();
  }
  // The MLP, on the ISA level's kernels (the MLP model's own: ADR 0008).
  for (size_t i = 0; i < layers_.size(); ++i) {
    const DenseLayer& layer = layers_[i];
    activations_[i].resize(static_cast<size_t>(layer.outputs) * n);
    kernels_->dense_forward(params + layer.weight_offset, params + layer.bias_offset, in,
                            layer.outputs, layer.inputs, n, /*relu=*/i + 1 < layers_.size(),
                            activations_[i].data());
    in = activations_[i].data();
  }
  // The linear part: one weight per categorical value and per crossed pair of values, plus a
  // linear term on the numerics.
  const ConstVectorMap v(params + wide_offset_, u);
  const size_t c = crosses_.size();
  for (int64_t j = 0; j < n; ++j) {
    float wide = v.dot(ConstVectorMap(numeric_.data() + j * u, u));
    for (int f = 0; f < kCtrCategorical; ++f) {
      wide += wide_rows[keys.position[j * kCtrCategorical + f]];
    }
    for (size_t x = 0; x < c; ++x) wide += wide_rows[keys.cross_position[j * c + x]];
    logits_[j] = activations_.back()[j] + wide;
  }
  if (architecture_ == CtrArchitecture::kDeepFm) ForwardFm(params, keys, deep_rows, n);
}

void CtrModel::ForwardFm(const float* params, const BatchKeys& keys, const float* deep_rows,
                         int64_t n) {
  const int e = embedding_dim_;
  fm_sum_.resize(static_cast<size_t>(e) * n);
  const bool numeric_fields = fm_offset_ >= 0;
  const ConstMatrixMap numeric_vectors(params + std::max<int64_t>(fm_offset_, 0), e,
                                       numeric_fields ? numeric_inputs_ : 0);
  for (int64_t j = 0; j < n; ++j) {
    // sum_(i<j) <u_i, u_j> = 1/2 (|sum_i u_i|^2 - sum_i |u_i|^2) (Rendle, 2010, lemma 3).
    VectorMap sum(fm_sum_.data() + j * e, e);
    sum.setZero();
    double squares = 0;
    for (int f = 0; f < kCtrCategorical; ++f) {
      const ConstVectorMap u(
          deep_rows + static_cast<ptrdiff_t>(keys.position[j * kCtrCategorical + f]) * e, e);
      sum += u;
      squares += u.squaredNorm();
    }
    if (numeric_fields) {
      const ConstVectorMap x(numeric_.data() + j * numeric_inputs_, numeric_inputs_);
      sum += numeric_vectors * x;
      squares +=
          (numeric_vectors.colwise().squaredNorm().transpose().array() * x.array().square()).sum();
    }
    logits_[j] += static_cast<float>(0.5 * (static_cast<double>(sum.squaredNorm()) - squares));
  }
}

void CtrModel::BackwardFm(const float* params, const BatchKeys& keys, const float* deep_rows,
                          const float* d_logit, int64_t n, float* dense_grad,
                          float* deep_grad) const {
  // dFM/du_i = sum_k u_k - u_i; the numeric fields' vectors are x_j n_j, so dFM/dn_j is x_j
  // times that.
  const int e = embedding_dim_;
  const int numeric_fields = fm_offset_ >= 0 ? numeric_inputs_ : 0;
  const ConstMatrixMap numeric_vectors(params + std::max<int64_t>(fm_offset_, 0), e,
                                       numeric_fields);
  MatrixMap d_numeric_vectors(dense_grad + std::max<int64_t>(fm_offset_, 0), e, numeric_fields);
  for (int64_t j = 0; j < n; ++j) {
    const ConstVectorMap sum(fm_sum_.data() + j * e, e);
    for (int f = 0; f < kCtrCategorical; ++f) {
      const ptrdiff_t p = keys.position[j * kCtrCategorical + f];
      VectorMap(deep_grad + p * e, e) += d_logit[j] * (sum - ConstVectorMap(deep_rows + p * e, e));
    }
    for (int i = 0; i < numeric_fields; ++i) {
      const float x = numeric_[j * numeric_inputs_ + i];
      if (x == 0.0f) continue;
      d_numeric_vectors.col(i) += (d_logit[j] * x) * (sum - x * numeric_vectors.col(i));
    }
  }
}

void CtrModel::BackwardCross(const float* params, int64_t n, float* dense_grad,
                             std::vector<float>& delta) {
  // With h = g (.) c0 for g = dLoss/dc_(l+1): dW_l = h c_l^T, db_l = sum h,
  // dLoss/dc_l = W_l^T h + g, and c0 collects g (.) z_l from every layer besides. Only the top
  // cross_dim rows take part; the numerics' rows below passed through unchanged.
  const int crossed = cross_dim_;
  const auto c0 = ConstMatrixMap(inputs_.data(), input_dim_, n).topRows(crossed);
  std::vector<float>& h_buffer = next_delta_;
  h_buffer.resize(static_cast<size_t>(crossed) * n);
  std::vector<float> d_c0(static_cast<size_t>(crossed) * n, 0.0f);
  MatrixMap d_c0_map(d_c0.data(), crossed, n);
  auto g = MatrixMap(delta.data(), input_dim_, n).topRows(crossed);
  MatrixMap h(h_buffer.data(), crossed, n);
  for (size_t l = cross_.size(); l-- > 0;) {
    const float* x_data = l == 0 ? inputs_.data() : cross_x_[l - 1].data();
    const auto x = ConstMatrixMap(x_data, input_dim_, n).topRows(crossed);
    h = g.cwiseProduct(c0);
    d_c0_map += g.cwiseProduct(ConstMatrixMap(cross_z_[l].data(), crossed, n));
    MatrixMap(dense_grad + cross_[l].weight_offset, crossed, crossed).noalias() = h * x.transpose();
    VectorMap(dense_grad + cross_[l].bias_offset, crossed) = h.rowwise().sum();
    g.noalias() +=
        ConstMatrixMap(params + cross_[l].weight_offset, crossed, crossed).transpose() * h;
  }
  g += d_c0_map;
}

absl::StatusOr<float> CtrModel::LossAndGradient(
    std::span<const float> params, const CtrBatchView& batch, const BatchKeys& keys,
    std::span<const float> deep_rows, std::span<const float> wide_rows, std::span<float> dense_grad,
    std::span<float> deep_grad, std::span<float> wide_grad) {
  SYNCOPATE_RETURN_IF_ERROR(Validate(params, batch, keys, deep_rows, wide_rows));
  if (std::cmp_not_equal(dense_grad.size(), num_parameters_) ||
      deep_grad.size() != deep_rows.size() || wide_grad.size() != wide_rows.size()) {
    return absl::InvalidArgumentError("gradient buffers do not match the parameters and rows");
  }
  for (int64_t j = 0; j < batch.size; ++j) {
    if (batch.labels[j] != 0.0f && batch.labels[j] != 1.0f) {
      return absl::InvalidArgumentError(
          absl::StrCat("label ", batch.labels[j], " of example ", j, " is not 0 or 1"));
    }
  }
  const int64_t n = batch.size;
  const size_t e = static_cast<size_t>(embedding_dim_);
  Forward(params.data(), batch, keys, deep_rows.data(), wide_rows.data());

  // Logistic loss in its stable form, log(1 + e^z) - y z = max(z, 0) - y z + log1p(e^-|z|);
  // dLoss/dz = sigmoid(z) - y, divided by n for the mean.
  double loss_sum = 0.0;
  std::vector<float>& d_logit = logits_;  // overwritten in place
  for (int64_t j = 0; j < n; ++j) {
    const double z = logits_[j];
    const double y = batch.labels[j];
    loss_sum += std::max(z, 0.0) - y * z + std::log1p(std::exp(-std::abs(z)));
    const double p = 1.0 / (1.0 + std::exp(-z));
    d_logit[j] = static_cast<float>((p - y) / static_cast<double>(n));
  }

  std::fill(dense_grad.begin(), dense_grad.end(), 0.0f);
  std::fill(deep_grad.begin(), deep_grad.end(), 0.0f);
  std::fill(wide_grad.begin(), wide_grad.end(), 0.0f);
  VectorMap d_v(dense_grad.data() + wide_offset_, numeric_inputs_);
  for (int64_t j = 0; j < n; ++j) {
    d_v += d_logit[j] * ConstVectorMap(numeric_.data() + j * numeric_inputs_, numeric_inputs_);
    for (int f = 0; f < kCtrCategorical; ++f) {
      wide_grad[keys.position[j * kCtrCategorical + f]] += d_logit[j];
    }
    for (size_t x = 0; x < crosses_.size(); ++x) {
      wide_grad[keys.cross_position[j * crosses_.size() + x]] += d_logit[j];
    }
  }
  if (architecture_ == CtrArchitecture::kDeepFm) {
    BackwardFm(params.data(), keys, deep_rows.data(), d_logit.data(), n, dense_grad.data(),
               deep_grad.data());
  }

  // Back through the MLP, down to its inputs (the embeddings need their gradient).
  const float* delta = d_logit.data();
  for (size_t i = layers_.size(); i-- > 0;) {
    const DenseLayer& layer = layers_[i];
    const float* in_data = i > 0            ? activations_[i - 1].data()
                           : cross_.empty() ? inputs_.data()
                                            : cross_x_.back().data();
    std::vector<float>& buffer = (delta == delta_.data()) ? next_delta_ : delta_;
    buffer.resize(static_cast<size_t>(layer.inputs) * n);
    // Below the first layer are the embeddings and numerics, not a ReLU.
    kernels_->dense_backward(params.data() + layer.weight_offset, delta, in_data, layer.outputs,
                             layer.inputs, n, dense_grad.data() + layer.weight_offset,
                             dense_grad.data() + layer.bias_offset, buffer.data(),
                             /*relu_in=*/i > 0);
    delta = buffer.data();
  }
  // `delta` is now dLoss/d(MLP input): x_L for a DCN, x0 otherwise.
  if (!cross_.empty()) {
    if (delta != delta_.data()) std::swap(delta_, next_delta_);
    BackwardCross(params.data(), n, dense_grad.data(), delta_);
    delta = delta_.data();
  }
  // Scatter the embedding part of dLoss/dx0 onto the rows.
  for (int64_t j = 0; j < n; ++j) {
    const float* column = delta + j * input_dim_;
    for (int f = 0; f < kCtrCategorical; ++f) {
      float* row = deep_grad.data() + keys.position[j * kCtrCategorical + f] * e;
      for (size_t k = 0; k < e; ++k) row[k] += column[f * e + k];
    }
  }
  return static_cast<float>(loss_sum / static_cast<double>(n));
}

absl::Status CtrModel::Predict(std::span<const float> params, const CtrBatchView& batch,
                               const BatchKeys& keys, std::span<const float> deep_rows,
                               std::span<const float> wide_rows, std::span<float> probabilities) {
  SYNCOPATE_RETURN_IF_ERROR(Validate(params, batch, keys, deep_rows, wide_rows));
  if (std::cmp_not_equal(probabilities.size(), batch.size)) {
    return absl::InvalidArgumentError("probabilities must have one entry per example");
  }
  Forward(params.data(), batch, keys, deep_rows.data(), wide_rows.data());
  for (int64_t j = 0; j < batch.size; ++j) {
    probabilities[j] = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(logits_[j]))));
  }
  return absl::OkStatus();
}

}  // namespace syncopate::model
