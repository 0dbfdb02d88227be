#include "libs/model/dense_layout.h"

namespace syncopate::model {

std::vector<DenseLayer> LayOutDenseLayers(int input_dim, std::span<const int> widths,
                                          int64_t& offset) {
  std::vector<DenseLayer> layers;
  layers.reserve(widths.size());
  int inputs = input_dim;
  for (const int outputs : widths) {
    DenseLayer layer{.inputs = inputs, .outputs = outputs, .weight_offset = offset};
    layer.bias_offset = offset + static_cast<int64_t>(outputs) * inputs;
    offset = layer.bias_offset + outputs;
    layers.push_back(layer);
    inputs = outputs;
  }
  return layers;
}

}  // namespace syncopate::model
