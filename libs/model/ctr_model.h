// Click-through-rate models on Criteo's 13 numeric and 26 categorical columns, logistic loss: the
// recommendation workload of docs/design.md §7. Three architectures share the embedding lookups
// (and so the sparse pull/push path), the linear part and the deep MLP; they differ in how they
// model interactions between features (ADR 0009):
//
//   x0     = [e_1 .. e_26 | x]                 e_i = emb(f_i), a row of the "deep" table
//   linear = sum_i w(f_i) + sum_(a,b) w(f_a x f_b) + v . x      w: rows of the "wide" table
//   WDL    (Cheng et al., 2016):  logit = MLP(x0) + linear
//   DEEPFM (Guo et al., 2017):    logit = MLP(x0) + linear + FM
//          FM = sum_(i<j) <u_i, u_j> over the 26 field vectors u_i = e_i (and, with fm_numeric,
//          the numeric inputs' u_(26+j) = x_j * n_j, n_j dense: ADR 0020), computed as
//          1/2 sum_k [(sum_i u_ik)^2 - sum_i u_ik^2], O(fields * dim) instead of O(fields^2 * dim)
//   DCN    (DCN-v2, Wang et al., 2021, "stacked"): c_(l+1) = c0 (.) (W_l c_l + b_l) + c_l for
//          l < cross_layers, W_l full rank, over c0 = [e_1 .. e_26] (with cross_numeric, over
//          c0 = x0: ADR 0021); logit = MLP([c_L | x]) + linear (MLP(c_L) with cross_numeric)
//   p = sigmoid(logit)
//
// where f_i is the categorical value of field i hashed into a 64-bit key (CategoricalKey), f_a x
// f_b are the optional hand-picked crosses (CrossKey; linear part only, as in the WDL paper) and
// x = log1p(max(numeric, 0)) with missing numerics as 0, followed, with missing_indicators, by
// one indicator per column that is 1 when the value is missing (x is then 26 wide, and so are
// v and the FM's numeric fields: a missing column gets a learned weight, and FM vector). The
// dense parameters (MLP, v, the FM's numeric vectors, the cross layers) form one flat vector like
// the Mlp's; the table rows live on the shards and only the rows a batch touches are pulled.
// Thread-safety: thread-compatible; use one instance per thread.
#ifndef SYNCOPATE_LIBS_MODEL_CTR_MODEL_H_
#define SYNCOPATE_LIBS_MODEL_CTR_MODEL_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "libs/isa/isa.h"
#include "libs/model/dense_layout.h"
#include "libs/model/mlp.h"
#include "libs/model/mlp_kernels.h"
#include "syncopate/v1/cluster.pb.h"

namespace syncopate::model {

inline constexpr int kCtrNumeric = 13;
inline constexpr int kCtrCategorical = 26;

// The key the value `value` of categorical field `field` is stored under, in every table. A
// fixed 64-bit mix (never std::hash), so workers and shards of any build agree.
uint64_t CategoricalKey(int field, uint64_t value);
// The key of cross `cross` (its index in the model's crosses) of the values `a` and `b`.
uint64_t CrossKey(int cross, uint64_t a, uint64_t b);

// Two categorical fields (0-based) whose value pairs get their own wide weight.
struct FieldPair {
  int first;
  int second;
};
// CTR examples, one per row; not owned.
struct CtrBatchView {
  const float* numeric;         // size x 13, row-major; NaN = missing
  const uint64_t* categorical;  // size x 26, row-major
  const float* labels;          // size, 0 or 1 (unused by Predict)
  int64_t size;
};

// The distinct keys a batch touches, in first-seen order: `keys` (the fields' values, pulled
// from both tables) and `wide_keys` (`keys`, then the crosses' keys, pulled from "wide" only).
struct BatchKeys {
  std::vector<uint64_t> keys;
  std::vector<uint64_t> wide_keys;
  std::vector<int32_t> position;        // size * 26: index into keys (and wide_keys)
  std::vector<int32_t> cross_position;  // size * crosses: index into wide_keys

  void Collect(const CtrBatchView& batch, std::span<const FieldPair> crosses = {});
};

enum class CtrArchitecture { kWideDeep, kDeepFm, kDcn };

struct CtrModelOptions {
  CtrArchitecture architecture = CtrArchitecture::kWideDeep;
  int embedding_dim = 16;
  std::vector<int> hidden;         // the deep MLP's hidden widths; empty = one linear unit
  std::vector<FieldPair> crosses;  // hand-picked crosses of the linear part (any architecture)
  int cross_layers = 0;            // kDcn: the number of cross layers, >= 1; others: 0
  // Thirteen more numeric inputs, one per column, 1 when the value is missing and 0 otherwise:
  // without them a missing count reads exactly like a count of 0 (ADR 0016).
  bool missing_indicators = false;
  // kDeepFm: the numeric inputs join the FM as fields x_j n_j ("fm/numeric"). Off: the FM pairs
  // the categorical fields only (ADR 0020: a heavy-tailed count makes its pairs as noisy as it).
  bool fm_numeric = false;
  // kDcn: the cross layers take the numeric inputs too (x0 = [e | x], the layout before ADR
  // 0021). Off: they cross the field embeddings only and the numerics join the MLP after them
  // (a count in x0 scales every cross term it meets, as in the FM).
  bool cross_numeric = false;
  // The level of the deep part's kernels (MlpKernelsFor): the best this CPU runs, as the MLP's.
  isa::IsaLevel isa_level = isa::ActiveIsaLevel();
};

class CtrModel {
 public:
  static constexpr int kDeepTable = 0;
  static constexpr int kWideTable = 1;

  // INVALID_ARGUMENT (one line naming the option) on a non-positive width, a cross of a field
  // outside [0, 26) or with itself, or cross_layers outside [1, 16] for kDcn (or non-zero for the
  // others).
  static absl::StatusOr<CtrModel> Create(CtrModelOptions options);

  // The dense tensors in flat-vector order: "deep<i>/w", "deep<i>/b" per hidden layer,
  // "deep_out/w", "deep_out/b", "wide/numeric"; then "fm/numeric" (kDeepFm with fm_numeric, dim x
  // numeric inputs) or "cross<l>/w", "cross<l>/b" per cross layer (kDcn; 26 * dim wide, or
  // 26 * dim + numeric inputs with cross_numeric). Without
  // missing_indicators a WDL's layout is the same as before the other architectures existed, so its
  // checkpoints stay readable.
  const std::vector<DenseTensorSpec>& tensors() const { return tensors_; }
  // "deep" (width embedding_dim, U(-0.05, 0.05)) and "wide" (width 1, zeros), in table-id order.
  std::vector<v1::EmbeddingTableSpec> tables() const;
  int64_t num_parameters() const { return num_parameters_; }
  int embedding_dim() const { return embedding_dim_; }
  CtrArchitecture architecture() const { return architecture_; }
  const std::vector<FieldPair>& crosses() const { return crosses_; }
  // Collects the keys of `batch` for this model's crosses.
  void CollectKeys(const CtrBatchView& batch, BatchKeys& keys) const {
    keys.Collect(batch, crosses_);
  }

  // Mean logistic loss over the batch. `deep_rows` (keys x embedding_dim) and `wide_rows`
  // (wide_keys) hold the rows of keys.keys / keys.wide_keys in order. Writes the gradients of that
  // mean: dense_grad (num_parameters) and the row gradients deep_grad / wide_grad (same shapes as
  // the rows; a key used several times gets the sum). INVALID_ARGUMENT before any work on a size
  // mismatch, an empty batch or a label other than 0/1.
  absl::StatusOr<float> LossAndGradient(std::span<const float> params, const CtrBatchView& batch,
                                        const BatchKeys& keys, std::span<const float> deep_rows,
                                        std::span<const float> wide_rows,
                                        std::span<float> dense_grad, std::span<float> deep_grad,
                                        std::span<float> wide_grad);

  // Click probabilities for the batch (probabilities.size() == batch.size).
  absl::Status Predict(std::span<const float> params, const CtrBatchView& batch,
                       const BatchKeys& keys, std::span<const float> deep_rows,
                       std::span<const float> wide_rows, std::span<float> probabilities);

 private:
  CtrModel(const CtrModelOptions& options, std::vector<DenseLayer> layers, int64_t wide_offset);

  absl::Status Validate(std::span<const float> params, const CtrBatchView& batch,
                        const BatchKeys& keys, std::span<const float> deep_rows,
                        std::span<const float> wide_rows) const;
  // Fills the scratch below for the batch; writes the logits into logits_.
  void Forward(const float* params, const CtrBatchView& batch, const BatchKeys& keys,
               const float* deep_rows, const float* wide_rows);
  // Adds the FM term to logits_ (fm_sum_ keeps sum_i u_i per example for the gradient).
  void ForwardFm(const float* params, const BatchKeys& keys, const float* deep_rows, int64_t n);
  // Backward of the FM term for d_logit (n): onto deep_grad rows and "fm/numeric".
  void BackwardFm(const float* params, const BatchKeys& keys, const float* deep_rows,
                  const float* d_logit, int64_t n, float* dense_grad, float* deep_grad) const;
  // Backward of the cross layers: `delta` (input_dim x n) is dLoss/d[c_L | x] on entry and
  // dLoss/dx0 on return (its numeric rows, which no parameter needs, as they came without
  // cross_numeric).
  void BackwardCross(const float* params, int64_t n, float* dense_grad, std::vector<float>& delta);

  CtrArchitecture architecture_;
  int embedding_dim_;
  int numeric_inputs_;              // 13, or 26 with missing indicators
  int input_dim_;                   // 26 * embedding_dim + numeric_inputs_
  int cross_dim_;                   // the cross layers' width: 26 * embedding_dim, or input_dim_
  std::vector<DenseLayer> layers_;  // hidden layers, then the output layer (1 unit)
  const MlpKernels* kernels_;       // the deep part's, MlpKernelsFor(options.isa_level)
  int64_t wide_offset_;             // of "wide/numeric"
  int64_t fm_offset_ = -1;          // of "fm/numeric" (kDeepFm with fm_numeric); -1 without
  std::vector<DenseLayer> cross_;   // cross_dim -> cross_dim each (kDcn)
  std::vector<FieldPair> crosses_;
  std::vector<DenseTensorSpec> tensors_;
  int64_t num_parameters_ = 0;

  // Scratch, column-major with one example per column.
  std::vector<float> inputs_;   // x0: input_dim x batch
  std::vector<float> numeric_;  // numeric_inputs x batch (transformed)
  // [c_1 | x] .. [c_L | x] (kDcn; input_dim x n, the numerics' rows passed through unchanged)
  std::vector<std::vector<float>> cross_x_;
  std::vector<std::vector<float>> cross_z_;  // W_l c_l + b_l, l = 0 .. L-1 (kDcn; cross_dim x n)
  std::vector<float> fm_sum_;                // dim x batch (kDeepFm)
  std::vector<std::vector<float>> activations_;
  std::vector<float> logits_;
  std::vector<float> delta_;
  std::vector<float> next_delta_;
};

}  // namespace syncopate::model

#endif  // SYNCOPATE_LIBS_MODEL_CTR_MODEL_H_
