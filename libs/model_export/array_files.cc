#include "libs/model_export/array_files.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace syncopate::model_export {
namespace {

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicBytes = 6;

const char* Descr(ArrayType type) { return type == ArrayType::kUint64 ? "<u8" : "<f4"; }

size_t BytesOf(ArrayType type) { return type == ArrayType::kUint64 ? 8 : 4; }

int64_t Product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// NumPy's repr of a shape tuple: "(3,)" or "(3, 16)".
std::string ShapeTuple(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

absl::Status NpyDataLoss(const std::string& path, absl::string_view why) {
  return absl::DataLossError(absl::StrCat(path, " is not an array this export reads: ", why));
}

// The text after `key` up to the first character in `stop` (exclusive).
bool ValueAfter(absl::string_view text, absl::string_view key, absl::string_view stop,
                absl::string_view* value) {
  const size_t at = text.find(key);
  if (at == absl::string_view::npos) return false;
  text.remove_prefix(at + key.size());
  const size_t end = text.find_first_of(stop);
  if (end == absl::string_view::npos) return false;
  *value = text.substr(0, end);
  return true;
}

template <typename T>
absl::Status ReadElements(const std::string& path, const NpyHeader& header, ArrayType want,
                          int64_t begin, std::span<T> out) {
  if (header.type != want) return NpyDataLoss(path, "its element type is not the expected one");
  if (begin < 0 || begin + static_cast<int64_t>(out.size()) > header.elements()) {
    return absl::OutOfRangeError(
        absl::StrCat("elements [", begin, ", ", begin + out.size(), ") are outside ", path));
  }
  std::ifstream in(path, std::ios::binary);
  in.seekg(header.data_offset + begin * static_cast<int64_t>(sizeof(T)));
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size_bytes()));
  if (!in) return NpyDataLoss(path, "it is shorter than its shape");
  return absl::OkStatus();
}

}  // namespace

int64_t NpyHeader::elements() const { return Product(shape); }

absl::StatusOr<NpyWriter> NpyWriter::Create(const std::string& path, ArrayType type,
                                            std::vector<int64_t> shape) {
  NpyWriter writer;
  writer.path_ = path;
  writer.type_ = type;
  writer.expected_ = Product(shape);
  writer.out_.open(path, std::ios::binary | std::ios::trunc);
  if (!writer.out_) return absl::UnavailableError(absl::StrCat("cannot create ", path));
  std::string dict = absl::StrCat("{'descr': '", Descr(type),
                                  "', 'fortran_order': False, 'shape': ", ShapeTuple(shape), ", }");
  // Magic (6) + version (2) + header length (2) + dict + padding + '\n', a multiple of 64 bytes
  // (what NumPy itself writes, so the data is aligned for memory mapping).
  const size_t unpadded = kNpyMagicBytes + 2 + 2 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict.push_back('\n');
  const uint16_t length = static_cast<uint16_t>(dict.size());
  writer.out_.write(kNpyMagic, kNpyMagicBytes);
  writer.out_.put('\x01');
  writer.out_.put('\x00');
  writer.out_.write(reinterpret_cast<const char*>(&length), sizeof(length));
  writer.out_.write(dict.data(), static_cast<std::streamsize>(dict.size()));
  return writer;
}

void NpyWriter::AppendBytes(const void* data, size_t bytes, ArrayType type) {
  if (type != type_) {
    wrong_type_ = true;
    return;
  }
  out_.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  written_ += static_cast<int64_t>(bytes / BytesOf(type));
}

void NpyWriter::Append(std::span<const uint64_t> values) {
  AppendBytes(values.data(), values.size_bytes(), ArrayType::kUint64);
}

void NpyWriter::Append(std::span<const float> values) {
  AppendBytes(values.data(), values.size_bytes(), ArrayType::kFloat32);
}

absl::Status NpyWriter::Close() {
  if (wrong_type_ || written_ != expected_) {
    return absl::InternalError(
        absl::StrCat(path_, ": ", written_, " elements written for a shape of ", expected_));
  }
  out_.flush();
  const bool good = static_cast<bool>(out_);
  out_.close();
  if (!good) return absl::UnavailableError(absl::StrCat("cannot write ", path_));
  return absl::OkStatus();
}

absl::StatusOr<NpyHeader> ReadNpyHeader(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, " does not exist"));
  char magic[kNpyMagicBytes + 2] = {};
  uint16_t length = 0;
  in.read(magic, sizeof(magic));
  in.read(reinterpret_cast<char*>(&length), sizeof(length));
  if (!in || std::memcmp(magic, kNpyMagic, kNpyMagicBytes) != 0 || magic[6] != 1) {
    return NpyDataLoss(path, "no .npy version 1 header");
  }
  std::string dict(length, '\0');
  in.read(dict.data(), length);
  if (!in) return NpyDataLoss(path, "its header is truncated");
  NpyHeader header;
  absl::string_view descr, fortran, shape;
  if (!ValueAfter(dict, "'descr': '", "'", &descr) ||
      !ValueAfter(dict, "'fortran_order': ", ",}", &fortran) ||
      !ValueAfter(dict, "'shape': (", ")", &shape)) {
    return NpyDataLoss(path, "its header does not parse");
  }
  if (descr == "<u8") {
    header.type = ArrayType::kUint64;
  } else if (descr == "<f4") {
    header.type = ArrayType::kFloat32;
  } else {
    return NpyDataLoss(path, absl::StrCat("element type ", descr, " (uint64 or float32 expected)"));
  }
  if (fortran != "False") return NpyDataLoss(path, "it is in Fortran order");
  for (absl::string_view d : absl::StrSplit(shape, ',', absl::SkipWhitespace())) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(d), &n) || n < 0) {
      return NpyDataLoss(path, "its shape does not parse");
    }
    header.shape.push_back(n);
  }
  header.data_offset = static_cast<int64_t>(kNpyMagicBytes + 2 + 2 + length);
  std::error_code error;
  const uint64_t size = std::filesystem::file_size(path, error);
  if (error || size != static_cast<uint64_t>(header.data_offset) +
                           static_cast<uint64_t>(header.elements()) * BytesOf(header.type)) {
    return NpyDataLoss(path, absl::StrCat("its size does not match its shape ",
                                          ShapeTuple(header.shape), " (truncated?)"));
  }
  return header;
}

absl::Status ReadNpy(const std::string& path, const NpyHeader& header, int64_t begin,
                     std::span<float> out) {
  return ReadElements(path, header, ArrayType::kFloat32, begin, out);
}

absl::Status ReadNpy(const std::string& path, const NpyHeader& header, int64_t begin,
                     std::span<uint64_t> out) {
  return ReadElements(path, header, ArrayType::kUint64, begin, out);
}

absl::Status WriteSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors) {
  std::string json = "{";
  uint64_t offset = 0;
  for (const NamedTensor& t : tensors) {
    if (Product(t.shape) != static_cast<int64_t>(t.values.size())) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", t.name, " has ", t.values.size(),
                                                     " values for its shape [",
                                                     absl::StrJoin(t.shape, ", "), "]"));
    }
    const uint64_t bytes = t.values.size_bytes();
    // Tensor names are the model's own (a PyTorch module's dotted names, the built-in models'
    // "dense0/w"): escape what JSON requires.
    std::string name;
    for (const char c : t.name) {
      if (c == '"' || c == '\\') {
        name.push_back('\\');
        name.push_back(c);
      } else if (static_cast<unsigned char>(c) < 0x20) {
        absl::StrAppend(&name, "\\u00", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
      } else {
        name.push_back(c);
      }
    }
    absl::StrAppend(&json, json.size() > 1 ? "," : "", "\"", name,
                    "\":{\"dtype\":\"F32\",\"shape\":[", absl::StrJoin(t.shape, ","),
                    "],\"data_offsets\":[", offset, ",", offset + bytes, "]}");
    offset += bytes;
  }
  json += "}";
  json.append((8 - json.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::UnavailableError(absl::StrCat("cannot create ", path));
  const uint64_t header_length = json.size();
  out.write(reinterpret_cast<const char*>(&header_length), sizeof(header_length));
  out.write(json.data(), static_cast<std::streamsize>(json.size()));
  for (const NamedTensor& t : tensors) {
    out.write(reinterpret_cast<const char*>(t.values.data()),
              static_cast<std::streamsize>(t.values.size_bytes()));
  }
  out.flush();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<LoadedTensor>> ReadSafetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, " does not exist"));
  auto loss = [&](absl::string_view why) {
    return absl::DataLossError(absl::StrCat(path, " is not a safetensors file this reads: ", why));
  };
  std::error_code error;
  const uint64_t size = std::filesystem::file_size(path, error);
  uint64_t header_length = 0;
  in.read(reinterpret_cast<char*>(&header_length), sizeof(header_length));
  if (!in || error || header_length > size - sizeof(header_length))
    return loss("bad header length");
  std::string json(header_length, '\0');
  in.read(json.data(), static_cast<std::streamsize>(header_length));
  google::protobuf::Struct header;
  if (!in || !google::protobuf::util::JsonStringToMessage(json, &header).ok()) {
    return loss("its header is not JSON");
  }
  const uint64_t data_begin = sizeof(header_length) + header_length;
  std::vector<LoadedTensor> tensors;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, entry] : header.fields()) {
    if (name == "__metadata__") continue;
    const auto& fields = entry.struct_value().fields();
    auto dtype = fields.find("dtype");
    auto shape = fields.find("shape");
    auto offsets = fields.find("data_offsets");
    if (dtype == fields.end() || shape == fields.end() || offsets == fields.end() ||
        offsets->second.list_value().values_size() != 2) {
      return loss(absl::StrCat("tensor ", name, " lacks dtype, shape or data_offsets"));
    }
    if (dtype->second.string_value() != "F32") {
      return loss(absl::StrCat("tensor ", name, " is ", dtype->second.string_value(), ", not F32"));
    }
    LoadedTensor tensor;
    tensor.name = name;
    for (const auto& d : shape->second.list_value().values()) {
      tensor.shape.push_back(static_cast<int64_t>(d.number_value()));
    }
    const uint64_t begin =
        static_cast<uint64_t>(offsets->second.list_value().values(0).number_value());
    const uint64_t end =
        static_cast<uint64_t>(offsets->second.list_value().values(1).number_value());
    if (end < begin || data_begin + end > size ||
        (end - begin) != static_cast<uint64_t>(Product(tensor.shape)) * sizeof(float)) {
      return loss(
          absl::StrCat("tensor ", name, "'s data_offsets do not fit its shape and the file"));
    }
    tensors.push_back(std::move(tensor));
    ranges.emplace_back(begin, end);
  }
  // Data order (the order the writer put them in), not the header's: Struct keeps no order.
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranges[a] < ranges[b]; });
  std::vector<LoadedTensor> sorted;
  for (size_t i : order) {
    LoadedTensor& t = tensors[i];
    t.values.resize((ranges[i].second - ranges[i].first) / sizeof(float));
    in.seekg(static_cast<std::streamoff>(data_begin + ranges[i].first));
    in.read(reinterpret_cast<char*>(t.values.data()),
            static_cast<std::streamsize>(ranges[i].second - ranges[i].first));
    if (!in) return loss("it is truncated");
    sorted.push_back(std::move(t));
  }
  return sorted;
}

}  // namespace syncopate::model_export
