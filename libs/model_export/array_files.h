// The array files an export is made of, written and read without NumPy or PyTorch: NumPy's .npy
// (format 1.0: what `numpy.load(path, mmap_mode="r")` maps) and the safetensors layout (an 8-byte
// header length, a JSON header, raw little-endian bytes: what PyTorch's ecosystem loads). Both are
// streamed: an NpyWriter writes rows as they come, so a table of any size is written with a
// chunk's memory at most.
// Thread-safety: thread-compatible (one writer per file); free functions are thread-safe.
#ifndef SYNCOPATE_LIBS_MODEL_EXPORT_ARRAY_FILES_H_
#define SYNCOPATE_LIBS_MODEL_EXPORT_ARRAY_FILES_H_

#include <cstdint>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace syncopate::model_export {

// The element types an export writes: "<u8" (keys) and "<f4" (values), NumPy's descr strings.
enum class ArrayType { kUint64, kFloat32 };

// Writes one .npy file of a shape known in advance, its elements appended in row-major order.
class NpyWriter {
 public:
  // Creates `path` and writes the header. UNAVAILABLE when the file cannot be created.
  static absl::StatusOr<NpyWriter> Create(const std::string& path, ArrayType type,
                                          std::vector<int64_t> shape);
  NpyWriter(NpyWriter&&) = default;
  NpyWriter& operator=(NpyWriter&&) = default;

  void Append(std::span<const uint64_t> values);
  void Append(std::span<const float> values);
  // Checks that exactly the shape's elements were appended, flushes and closes. INTERNAL for a
  // count that differs, UNAVAILABLE for a write error.
  absl::Status Close();

 private:
  NpyWriter() = default;
  void AppendBytes(const void* data, size_t bytes, ArrayType type);

  std::string path_;
  ArrayType type_ = ArrayType::kFloat32;
  int64_t expected_ = 0;
  int64_t written_ = 0;
  bool wrong_type_ = false;
  std::ofstream out_;
};

// A .npy file's header, read from its start.
struct NpyHeader {
  ArrayType type;
  std::vector<int64_t> shape;
  int64_t data_offset = 0;  // where the elements start
  int64_t elements() const;
};
// DATA_LOSS naming the file when it is not a little-endian, C-order uint64 or float32 .npy whose
// size matches its shape; NOT_FOUND when it does not exist.
absl::StatusOr<NpyHeader> ReadNpyHeader(const std::string& path);
// Reads elements [begin, begin + out.size()) of a float32 (or uint64) .npy.
absl::Status ReadNpy(const std::string& path, const NpyHeader& header, int64_t begin,
                     std::span<float> out);
absl::Status ReadNpy(const std::string& path, const NpyHeader& header, int64_t begin,
                     std::span<uint64_t> out);

// One float32 tensor of a safetensors file.
struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::span<const float> values;  // not owned; product(shape) elements
};
// Writes the tensors in the given order (header keys in that order, padded to 8 bytes, then the
// data): the same tensors give the same bytes. INVALID_ARGUMENT for a shape that does not match
// its values.
absl::Status WriteSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors);

struct LoadedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};
// Every F32 tensor of a safetensors file, in the file's data order. DATA_LOSS naming the file for
// a header that does not parse, a dtype other than F32, or offsets outside the file.
absl::StatusOr<std::vector<LoadedTensor>> ReadSafetensors(const std::string& path);

}  // namespace syncopate::model_export

#endif  // SYNCOPATE_LIBS_MODEL_EXPORT_ARRAY_FILES_H_
