// DenseLayer: where one fully connected layer lives in a model's flat parameter vector, and the
// one function that lays out a stack of them (the MLP, the CTR models' deep part and DCN-v2's
// cross layers all use it, so their layouts cannot drift apart).
//
// Thread-safety: plain values and a pure function.
#ifndef SYNCOPATE_LIBS_MODEL_DENSE_LAYOUT_H_
#define SYNCOPATE_LIBS_MODEL_DENSE_LAYOUT_H_

#include <cstdint>
#include <span>
#include <vector>

namespace syncopate::model {

// A layer y = W·x + b with W of outputs × inputs, row-major, followed in the flat vector by b.
struct DenseLayer {
  int inputs = 0;
  int outputs = 0;
  int64_t weight_offset = 0;  // into the flat parameter vector
  int64_t bias_offset = 0;    // weight_offset + outputs·inputs
};

// Lays out layers input_dim → widths[0] → widths[1] → … contiguously from `offset` (each layer's
// weights, then its bias) and advances `offset` past the last. Widths must be positive (the
// models validate them first, with their own messages).
std::vector<DenseLayer> LayOutDenseLayers(int input_dim, std::span<const int> widths,
                                          int64_t& offset);

}  // namespace syncopate::model

#endif  // SYNCOPATE_LIBS_MODEL_DENSE_LAYOUT_H_
