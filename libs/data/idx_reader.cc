#include "libs/data/idx_reader.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "libs/common/status_macros.h"
#include "libs/data/gzip_file.h"

namespace syncopate::data {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // type u8 (0x08), 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // type u8 (0x08), 1 dimension

// gzread moves at most this much per call: large enough that zlib's per-call overhead vanishes,
// small enough that the staging buffer stays in L2 while pixels are converted to floats.
constexpr int64_t kReadChunkBytes = int64_t{1} << 20;
// zlib's own input buffer (default 8 KiB); bigger means fewer read(2) calls.
constexpr unsigned kGzInputBufferBytes = 1u << 18;
// A header is only a claim until the data arrives: never reserve more than this up front, so a
// corrupt count yields DATA_LOSS at the end of the file rather than a huge allocation.
// Fashion-MNIST train (60000 x 784 floats) fits in one reservation.
constexpr int64_t kMaxUpfrontReserveElements = int64_t{1} << 26;

// One open IDX file plus the bookkeeping needed for precise error messages.
struct IdxStream {
  GzFile file;
  std::string path;
  int64_t offset = 0;  // uncompressed bytes consumed so far
};

absl::StatusOr<IdxStream> OpenIdx(const std::string& path) {
  // "e": O_CLOEXEC, so processes we spawn do not inherit the descriptor.
  SYNCOPATE_ASSIGN_OR_RETURN(GzFile file, OpenGzFile(path, "rbe", "IDX file"));
  gzbuffer(file.get(), kGzInputBufferBytes);
  return IdxStream{std::move(file), path, 0};
}

// Reads exactly `total_bytes` from `stream` in chunks, handing each chunk to
// `consume(const uint8_t* data, int64_t size)`. `what` names the section for error messages.
template <typename Consumer>
absl::Status ReadExactly(IdxStream& stream, absl::string_view what, int64_t total_bytes,
                         Consumer&& consume) {
  std::vector<uint8_t> chunk(static_cast<size_t>(std::min(total_bytes, kReadChunkBytes)));
  const int64_t section_offset = stream.offset;
  int64_t read_total = 0;
  while (read_total < total_bytes) {
    const auto want = static_cast<unsigned>(std::min(total_bytes - read_total, kReadChunkBytes));
    const int got = gzread(stream.file.get(), chunk.data(), want);
    if (got > 0) {
      consume(chunk.data(), static_cast<int64_t>(got));
      read_total += got;
      stream.offset += got;
      continue;
    }
    int zlib_error = Z_OK;
    const char* zlib_message = gzerror(stream.file.get(), &zlib_error);
    if (zlib_error == Z_ERRNO) {
      return absl::UnknownError(
          absl::StrCat("cannot read IDX file '", stream.path, "': ", std::strerror(errno)));
    }
    if (zlib_error != Z_OK && zlib_error != Z_BUF_ERROR) {
      // Z_DATA_ERROR and friends: the gzip stream itself is damaged.
      return absl::DataLossError(
          absl::StrCat("IDX file '", stream.path, "' is corrupt: ", zlib_message));
    }
    // End of input (Z_BUF_ERROR: a gzip stream that stops mid-member) before the header's promise
    // was kept. For a cut gzip stream zlib drops the bytes of its final partial gzread, so the
    // reported count is then a lower bound.
    return absl::DataLossError(absl::StrCat(
        "IDX file '", stream.path, "' is truncated: ", what, " at byte offset ", section_offset,
        " should be ", total_bytes, " bytes, but only ", read_total, " could be read",
        zlib_error == Z_BUF_ERROR ? " (gzip stream ends early)" : ""));
  }
  return absl::OkStatus();
}

// Reads `count` big-endian u32 values (the IDX header is big-endian regardless of the host).
absl::StatusOr<std::vector<uint32_t>> ReadBigEndianU32s(IdxStream& stream, absl::string_view what,
                                                        int count) {
  const int64_t num_bytes = int64_t{4} * count;
  std::vector<uint8_t> bytes;
  bytes.reserve(num_bytes);
  SYNCOPATE_RETURN_IF_ERROR(
      ReadExactly(stream, what, num_bytes, [&bytes](const uint8_t* data, int64_t size) {
        bytes.insert(bytes.end(), data, data + size);
      }));
  std::vector<uint32_t> values(count);
  for (int i = 0; i < count; ++i) {
    const uint8_t* b = &bytes[size_t{4} * i];
    values[i] = (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
  }
  return values;
}

// Reads the magic number and the `num_dims` dimension sizes that follow it.
absl::StatusOr<std::vector<uint32_t>> ReadIdxHeader(IdxStream& stream, uint32_t expected_magic,
                                                    int num_dims, absl::string_view kind) {
  SYNCOPATE_ASSIGN_OR_RETURN(std::vector<uint32_t> magic,
                             ReadBigEndianU32s(stream, "the magic number", 1));
  if (magic[0] != expected_magic) {
    return absl::DataLossError(absl::StrCat(
        "IDX file '", stream.path, "' has magic number 0x", absl::Hex(magic[0], absl::kZeroPad8),
        ", expected 0x", absl::Hex(expected_magic, absl::kZeroPad8), " (", kind, ")"));
  }
  return ReadBigEndianU32s(stream, "the dimension sizes", num_dims);
}

// Pixel byte -> feature, computed once: exact (value / 255.0f) and cheaper than dividing 47M times.
const std::array<float, 256>& PixelScale() {
  static const std::array<float, 256> kTable = [] {
    std::array<float, 256> table{};
    for (int v = 0; v < 256; ++v) table[v] = static_cast<float>(v) / 255.0f;
    return table;
  }();
  return kTable;
}

}  // namespace

absl::StatusOr<Dataset> ReadIdxPair(const std::string& images_path, const std::string& labels_path,
                                    int64_t limit) {
  if (limit < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit must be >= 0 (0 = all examples), got ", limit));
  }

  SYNCOPATE_ASSIGN_OR_RETURN(IdxStream labels_file, OpenIdx(labels_path));
  SYNCOPATE_ASSIGN_OR_RETURN(std::vector<uint32_t> label_dims,
                             ReadIdxHeader(labels_file, kLabelsMagic, 1, "IDX u8 1-D labels"));
  SYNCOPATE_ASSIGN_OR_RETURN(IdxStream images_file, OpenIdx(images_path));
  SYNCOPATE_ASSIGN_OR_RETURN(std::vector<uint32_t> image_dims,
                             ReadIdxHeader(images_file, kImagesMagic, 3, "IDX u8 3-D images"));

  const int64_t count = image_dims[0];
  const int64_t rows = image_dims[1];
  const int64_t cols = image_dims[2];
  // Divide rather than multiply: two u32 sides can overflow int64 (found by fuzzing).
  if (rows == 0 || cols == 0 || rows > INT_MAX / cols) {
    return absl::DataLossError(absl::StrCat("IDX file '", images_path, "' has image size ", rows,
                                            " x ", cols, "; expected each side > 0 and at most ",
                                            INT_MAX, " pixels"));
  }
  if (label_dims[0] != count) {
    return absl::DataLossError(absl::StrCat("IDX files disagree: '", images_path, "' holds ", count,
                                            " images but '", labels_path, "' holds ", label_dims[0],
                                            " labels"));
  }

  // All labels are read even under a limit (they are 1 byte per example), so num_classes does not
  // depend on which examples happen to come first.
  std::vector<uint8_t> all_labels;
  all_labels.reserve(static_cast<size_t>(std::min(count, kMaxUpfrontReserveElements)));
  SYNCOPATE_RETURN_IF_ERROR(ReadExactly(labels_file, "the labels", count,
                                        [&all_labels](const uint8_t* data, int64_t size) {
                                          all_labels.insert(all_labels.end(), data, data + size);
                                        }));

  Dataset dataset;
  dataset.size = limit > 0 ? std::min(limit, count) : count;
  dataset.dim = static_cast<int>(rows * cols);
  // u8 labels are 0..255 by construction, so every byte is a valid class id; the class count is
  // what the file implies.
  dataset.num_classes =
      all_labels.empty() ? 0 : *std::max_element(all_labels.begin(), all_labels.end()) + 1;
  dataset.labels.assign(all_labels.begin(), all_labels.begin() + dataset.size);

  const int64_t pixel_bytes = dataset.size * dataset.dim;
  dataset.features.reserve(static_cast<size_t>(std::min(pixel_bytes, kMaxUpfrontReserveElements)));
  const std::array<float, 256>& scale = PixelScale();
  SYNCOPATE_RETURN_IF_ERROR(
      ReadExactly(images_file, "the pixels", pixel_bytes,
                  [&features = dataset.features, &scale](const uint8_t* data, int64_t size) {
                    const size_t start = features.size();
                    features.resize(start + size);
                    float* out = features.data() + start;
                    for (int64_t i = 0; i < size; ++i) out[i] = scale[data[i]];
                  }));
  return dataset;
}

namespace {

absl::string_view SplitPrefix(Split split) { return split == Split::kTrain ? "train" : "t10k"; }

absl::Status WithInstallHint(const absl::Status& status) {
  if (!absl::IsNotFound(status)) return status;
  return absl::NotFoundError(
      absl::StrCat(status.message(),
                   "; Fashion-MNIST comes from Debian's package: apt-get install "
                   "dataset-fashion-mnist (files land in /usr/share/datasets/fashion-mnist)"));
}

}  // namespace

absl::StatusOr<int64_t> CountFashionMnist(const std::string& dir, Split split) {
  const std::string path = absl::StrCat(dir, "/", SplitPrefix(split), "-labels-idx1-ubyte.gz");
  absl::StatusOr<IdxStream> stream = OpenIdx(path);
  if (!stream.ok()) return WithInstallHint(stream.status());
  absl::StatusOr<std::vector<uint32_t>> dims = ReadIdxHeader(*stream, kLabelsMagic, 1, "labels");
  if (!dims.ok()) return dims.status();
  return static_cast<int64_t>((*dims)[0]);
}

absl::StatusOr<Dataset> LoadFashionMnist(const std::string& dir, Split split, int64_t limit) {
  const absl::string_view prefix = SplitPrefix(split);
  absl::StatusOr<Dataset> dataset =
      ReadIdxPair(absl::StrCat(dir, "/", prefix, "-images-idx3-ubyte.gz"),
                  absl::StrCat(dir, "/", prefix, "-labels-idx1-ubyte.gz"), limit);
  if (!dataset.ok()) return WithInstallHint(dataset.status());
  return dataset;
}

}  // namespace syncopate::data
