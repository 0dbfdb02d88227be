// Wide & deep (Cheng et al., 2016) for click-through rate on Criteo's 13 numeric and 26
// categorical columns, with logistic loss: the recommendation workload of docs/design.md §7.
//
//   deep:  [emb(f_1) .. emb(f_26) | x] -> ReLU hidden layers -> 1 logit
//   wide:  sum_f w(f_i) + sum_(a,b) w(f_a x f_b) + v . x
//   p = sigmoid(deep + wide)
//
// where f_i is the categorical value of field i hashed into a 64-bit key (CategoricalKey), emb
// and w are rows of the embedding tables "deep" (width embedding_dim) and "wide" (width 1),
// f_a x f_b are the configured cross-product features (CrossKey; wide only, as in the paper),
// and x = log1p(max(numeric, 0)) with missing numerics as 0. The dense parameters (MLP, v) form one
// flat vector like the Mlp's; the table rows live on the shards and only the rows a batch touches
// are pulled. Thread-safety: thread-compatible; use one instance per thread.
#ifndef SYNCOPATE_LIBS_MODEL_WDL_H_
#define SYNCOPATE_LIBS_MODEL_WDL_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "libs/model/mlp.h"
#include "syncopate/v1/cluster.pb.h"

namespace syncopate::model {

inline constexpr int kWdlNumeric = 13;
inline constexpr int kWdlCategorical = 26;

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

class Wdl {
 public:
  static constexpr int kDeepTable = 0;
  static constexpr int kWideTable = 1;

  // INVALID_ARGUMENT on a non-positive width or a cross of a field outside [0, 26) or with itself.
  static absl::StatusOr<Wdl> Create(int embedding_dim, std::vector<int> hidden,
                                    std::vector<FieldPair> crosses = {});

  // The dense tensors in flat-vector order: "deep<i>/w", "deep<i>/b" per hidden layer,
  // "deep_out/w", "deep_out/b", "wide/numeric".
  const std::vector<DenseTensorSpec>& tensors() const { return tensors_; }
  // "deep" (width embedding_dim, U(-0.05, 0.05)) and "wide" (width 1, zeros), in table-id order.
  std::vector<v1::EmbeddingTableSpec> tables() const;
  int64_t num_parameters() const { return num_parameters_; }
  int embedding_dim() const { return embedding_dim_; }
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
  struct Layer {
    int inputs;
    int outputs;
    int64_t weight_offset;
    int64_t bias_offset;
  };

  Wdl(int embedding_dim, std::vector<Layer> layers, int64_t wide_offset,
      std::vector<FieldPair> crosses);

  absl::Status Validate(std::span<const float> params, const CtrBatchView& batch,
                        const BatchKeys& keys, std::span<const float> deep_rows,
                        std::span<const float> wide_rows) const;
  // Fills inputs_ and activations_ for the batch; writes the logits into logits_.
  void Forward(const float* params, const CtrBatchView& batch, const BatchKeys& keys,
               const float* deep_rows, const float* wide_rows);

  int embedding_dim_;
  int input_dim_;              // 26 * embedding_dim + 13
  std::vector<Layer> layers_;  // hidden layers, then the output layer (1 unit)
  int64_t wide_offset_;        // of "wide/numeric"
  std::vector<FieldPair> crosses_;
  std::vector<DenseTensorSpec> tensors_;
  int64_t num_parameters_;

  // Scratch, column-major with one example per column.
  std::vector<float> inputs_;   // input_dim x batch
  std::vector<float> numeric_;  // 13 x batch (transformed)
  std::vector<std::vector<float>> activations_;
  std::vector<float> logits_;
  std::vector<float> delta_;
  std::vector<float> next_delta_;
};

}  // namespace syncopate::model

#endif  // SYNCOPATE_LIBS_MODEL_WDL_H_
