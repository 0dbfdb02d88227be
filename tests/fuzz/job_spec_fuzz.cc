// Fuzz target: the job-spec parser (protobuf text format, defaults, validation). A spec it
// accepts must survive a round trip through JobSpecToText unchanged.
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "google/protobuf/util/message_differencer.h"
#include "libs/job/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<syncopate::v1::JobSpec> spec = syncopate::job::ParseJobSpec(text);
  if (!spec.ok()) {
    if (spec.status().message().empty()) std::abort();  // errors are one clear line
    return 0;
  }
  absl::StatusOr<syncopate::v1::JobSpec> again =
      syncopate::job::ParseJobSpec(syncopate::job::JobSpecToText(*spec));
  if (!again.ok() || !google::protobuf::util::MessageDifferencer::Equals(*spec, *again)) {
    std::abort();
  }
  return 0;
}
