// Fuzz target: the Criteo TSV reader. The first byte picks a limit (0..3) and how the rest is
// read: parsed in memory only, or also written to a file plain or gzip-compressed and read back
// with ReadCriteoTsv. The in-memory parse is the reference: the file reader must return the same
// rows, or the same error code with the in-memory message after the path. Whatever is returned
// must be self-consistent.
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "libs/data/criteo_files.h"
#include "libs/data/criteo_reader.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

using syncopate::data::CtrDataset;

std::string TempPath(const char* what) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/syncopate-criteo-fuzz-" +
         std::to_string(getpid()) + "-" + what;
}

void Check(bool condition) {
  if (!condition) std::abort();
}

void CheckConsistent(const CtrDataset& d, int64_t limit) {
  Check(d.size >= 0 && (limit == 0 || d.size <= limit));
  Check(d.labels.size() == static_cast<size_t>(d.size));
  Check(d.numeric.size() == static_cast<size_t>(d.size) * syncopate::data::kCriteoNumeric);
  Check(d.categorical.size() == static_cast<size_t>(d.size) * syncopate::data::kCriteoCategorical);
  for (float label : d.labels) Check(label == 0.0f || label == 1.0f);
  for (float x : d.numeric) Check(std::isnan(x) || x == std::floor(x));
  for (uint64_t c : d.categorical) {
    Check(c == syncopate::data::kMissingCategory || c < (1ULL << 60));
  }
}

bool SameRows(const CtrDataset& a, const CtrDataset& b) {
  return a.size == b.size && a.labels == b.labels && a.categorical == b.categorical &&
         a.numeric.size() == b.numeric.size() &&
         // memcmp must not see the null data() of an empty vector, even for 0 bytes.
         (a.numeric.empty() ||
          std::memcmp(a.numeric.data(), b.numeric.data(), a.numeric.size() * sizeof(float)) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  syncopate::fuzz::FuzzInput in(data, size);
  const uint8_t choice = in.Byte();
  const int64_t limit = choice & 3;
  const std::string text = in.Rest();
  const absl::StatusOr<CtrDataset> parsed = syncopate::data::ParseCriteoTsv(text, limit);
  if (parsed.ok()) {
    CheckConsistent(*parsed, limit);
  } else {
    Check(parsed.status().code() == absl::StatusCode::kDataLoss);
    Check(absl::StartsWith(parsed.status().message(), "line "));
  }

  const int how = (choice >> 2) % 3;  // 0: memory only, 1: plain file, 2: gzip file
  // Plain bytes that start like gzip would be decompressed by gzread: not the same input.
  if (how == 0 || (how == 1 && text.size() >= 2 && text[0] == '\x1f' && text[1] == '\x8b')) {
    return 0;
  }
  static const std::string path = TempPath("day");
  if (how == 1) {
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(text.data(), static_cast<std::streamsize>(text.size()));
  } else {
    gzFile file = gzopen(path.c_str(), "wb1");
    Check(file != nullptr);
    Check(text.empty() || gzwrite(file, text.data(), static_cast<unsigned>(text.size())) ==
                              static_cast<int>(text.size()));
    Check(gzclose(file) == Z_OK);
  }
  const absl::StatusOr<CtrDataset> read = syncopate::data::ReadCriteoTsv(path, limit);
  Check(read.ok() == parsed.ok());
  if (read.ok()) {
    Check(SameRows(*read, *parsed));
  } else {
    Check(read.status().code() == parsed.status().code());
    Check(absl::EndsWith(read.status().message(), parsed.status().message()));
  }
  return 0;
}
