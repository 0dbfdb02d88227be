// Fuzz target: the IDX reader. The input is split into an images file and a labels file (the
// first byte says where), written to temp files, and read plain (and, by zlib, as gzip when the
// bytes look like it) with a fuzzed limit. Whatever it returns must be self-consistent.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "libs/data/idx_reader.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

std::string TempPath(const char* what) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/syncopate-idx-fuzz-" +
         std::to_string(getpid()) + "-" + what;
}

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  syncopate::fuzz::FuzzInput in(data, size);
  const int64_t limit = in.Byte() % 5;
  const std::string images_bytes = in.Bytes(255);
  const std::string labels_bytes = in.Rest();
  static const std::string images = TempPath("images");
  static const std::string labels = TempPath("labels");
  Write(images, images_bytes);
  Write(labels, labels_bytes);
  absl::StatusOr<syncopate::data::Dataset> dataset =
      syncopate::data::ReadIdxPair(images, labels, limit);
  if (!dataset.ok()) return 0;
  const syncopate::data::Dataset& d = *dataset;
  if (d.size < 0 || (limit > 0 && d.size > limit)) std::abort();
  if (d.features.size() != static_cast<size_t>(d.size) * static_cast<size_t>(d.dim)) std::abort();
  if (d.labels.size() != static_cast<size_t>(d.size)) std::abort();
  for (float x : d.features) {
    if (!(x >= 0.0f && x <= 1.0f)) std::abort();
  }
  for (int32_t label : d.labels) {
    if (label < 0 || label >= d.num_classes) std::abort();
  }
  return 0;
}
