#include "libs/model_export/manifest.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"

namespace syncopate::model_export {

std::string ManifestJson(const v1::ExportManifest& manifest) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(manifest, &json, options);
  return json;
}

absl::StatusOr<v1::ExportManifest> ReadManifest(const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/", kManifestFile);
  std::ifstream in(path);
  if (!in)
    return absl::NotFoundError(absl::StrCat(dir, " is not an export (no ", kManifestFile, ")"));
  std::stringstream text;
  text << in.rdbuf();
  v1::ExportManifest manifest;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(text.str(), &manifest, options).ok()) {
    return absl::DataLossError(absl::StrCat(path, " does not parse"));
  }
  if (manifest.format() != kFormat) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is of format '", manifest.format(),
                                                      "', this release reads ", kFormat));
  }
  return manifest;
}

absl::StatusOr<v1::JobSpec> ReadExportJob(const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/", kJobFile);
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(dir, " is not an export (no ", kJobFile, ")"));
  std::stringstream text;
  text << in.rdbuf();
  v1::JobSpec job;
  if (!google::protobuf::TextFormat::ParseFromString(text.str(), &job)) {
    return absl::DataLossError(absl::StrCat(path, " does not parse"));
  }
  return job;
}

bool IsExport(const std::string& dir) {
  std::error_code error;
  return std::filesystem::is_regular_file(absl::StrCat(dir, "/", kManifestFile), error);
}

}  // namespace syncopate::model_export
