// `syncopate export --from=DIR --out=DIR`: a job's checkpoints (the latest set, or kept/) as one
// directory tools outside the cluster read (docs/export-format.md; libs/model_export).
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "libs/job/job_spec.h"
#include "libs/model_export/exporter.h"
#include "libs/model_export/publisher.h"
#include "libs/runtime/process_runtime.h"
#include "services/cli/commands.h"
#ifdef SYNCOPATE_WITH_TORCH
#include "libs/pytorch/torch_export.h"
#endif

namespace syncopate::cli {

int RunExport() {
  const std::string from = absl::GetFlag(FLAGS_from);
  const std::string out = absl::GetFlag(FLAGS_out);
  const std::string into = absl::GetFlag(FLAGS_into);
  if (from.empty()) {
    runtime::Die("export: --from is required (a checkpoint directory, or its kept/ directory)");
  }
  if (out.empty() == into.empty()) {
    runtime::Die("export: give --out (a new directory) or --into (a directory of versions)");
  }
  if (absl::GetFlag(FLAGS_keep) < 1) runtime::Die("export: --keep must be >= 1");
  model_export::ExportRequest request{.from = from};
  v1::JobSpec job;
  if (const std::string path = absl::GetFlag(FLAGS_job); !path.empty()) {
    absl::StatusOr<v1::JobSpec> loaded = job::LoadJobSpecFile(path);
    if (!loaded.ok()) runtime::Die(absl::StrCat("export: ", loaded.status().message()));
    job = *std::move(loaded);
    request.job = &job;
  }
  model_export::FormatWriter formats;
  std::string note = " (model.pt and model.onnx need a build with PyTorch)";
#ifdef SYNCOPATE_WITH_TORCH
  if (absl::GetFlag(FLAGS_torch_formats)) {
    const std::string module = absl::GetFlag(FLAGS_module);
    formats = [module](const std::string& dir, const v1::ExportManifest& manifest) {
      return pytorch::WriteTorchFormats(dir, manifest, module);
    };
    note.clear();
  } else {
    note = " (--notorch_formats: no model.pt or model.onnx)";
  }
#endif
  if (!into.empty()) {
    absl::StatusOr<v1::ExportRecord> record = model_export::PublishVersion(
        request, {.dir = into, .keep = absl::GetFlag(FLAGS_keep), .formats = formats});
    if (!record.ok()) runtime::Die(absl::StrCat("export: ", record.status().message()), 1);
    printf("syncopate export: %s (%s, version %s) published; %s/current points at it%s\n",
           record->path().c_str(), record->source().c_str(),
           absl::StrJoin(record->versions(), ",").c_str(), into.c_str(), note.c_str());
    return 0;
  }
  absl::StatusOr<v1::ExportManifest> manifest = model_export::ExportTo(request, out, formats);
  if (!manifest.ok()) runtime::Die(absl::StrCat("export: ", manifest.status().message()), 1);
  std::vector<std::string> tables;
  for (const v1::ExportTable& table : manifest->tables()) {
    tables.push_back(absl::StrCat(table.name(), " ", table.count(), " rows"));
  }
  printf("syncopate export: %s job '%s' (%s, version %s) -> %s: %d dense tensors%s%s%s\n",
         manifest->model_kind().c_str(), manifest->job_id().c_str(), manifest->source().c_str(),
         absl::StrJoin(manifest->versions(), ",").c_str(), out.c_str(), manifest->dense_size(),
         tables.empty() ? "" : ", tables: ", absl::StrJoin(tables, ", ").c_str(), note.c_str());
  return 0;
}

}  // namespace syncopate::cli
