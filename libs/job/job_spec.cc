#include "libs/job/job_spec.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "libs/common/mode_rules.h"
#include "libs/common/status_macros.h"
#include "libs/job/model_kind.h"
#include "libs/optim/optimizer.h"

namespace syncopate::job {
namespace {

// Keeps the first parse error with its position, to report it in one line.
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (error_.empty()) error_ = absl::StrCat("line ", line + 1, ":", column + 1, ": ", message);
  }
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

}  // namespace

absl::Status ParseTextProto(absl::string_view text, absl::string_view what,
                            google::protobuf::Message& message) {
  google::protobuf::TextFormat::Parser parser;
  FirstErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(text), &message)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", errors.error()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadSpecFile(const std::string& path, absl::string_view what) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(what, " ", path, ": cannot open file"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<v1::JobSpec> ParseJobSpec(absl::string_view text) {
  v1::JobSpec spec;
  SYNCOPATE_RETURN_IF_ERROR(ParseTextProto(text, "job spec", spec));
  ApplyJobDefaults(spec);
  SYNCOPATE_RETURN_IF_ERROR(ValidateJobSpec(spec));
  return spec;
}

absl::StatusOr<v1::JobSpec> LoadJobSpecFile(const std::string& path) {
  SYNCOPATE_ASSIGN_OR_RETURN(const std::string text, ReadSpecFile(path, "job spec"));
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(text);
  if (!spec.ok()) {
    return absl::Status(spec.status().code(), absl::StrCat(path, ": ", spec.status().message()));
  }
  return spec;
}

void ApplyJobDefaults(v1::JobSpec& spec) {
  if (spec.job_id().empty()) spec.set_job_id("job");
  if (absl::StatusOr<const ModelKind*> kind = FindModelKind(spec.model().kind()); kind.ok()) {
    (*kind)->ApplyDefaults(spec);
  }
  if (spec.block_size() == 0) spec.set_block_size(1000);
  if (spec.eval().interval_seconds() == 0) spec.mutable_eval()->set_interval_seconds(5);
  if (spec.mode() == v1::MODE_UNSPECIFIED) spec.set_mode(kDefaultMode);
  if (spec.seed() == 0) spec.set_seed(1);
  if (spec.checkpoint_interval_seconds() == 0) spec.set_checkpoint_interval_seconds(30);
}

v1::DenseEncoding TrainingDenseEncoding(const v1::JobSpec& spec) {
  return spec.wire_precision() == v1::WIRE_BFLOAT16 ? v1::DENSE_BFLOAT16 : v1::DENSE_FLOAT32;
}

absl::Status ValidateJobSpec(const v1::JobSpec& spec) {
  auto bad = [](absl::string_view field, auto... why) {
    return absl::InvalidArgumentError(absl::StrCat("job spec: ", field, " ", why...));
  };
  for (int width : spec.model().hidden()) {
    if (width <= 0) return bad("model.hidden", "widths must be positive, got ", width);
  }
  SYNCOPATE_ASSIGN_OR_RETURN(const ModelKind* kind, FindModelKind(spec.model().kind()));
  SYNCOPATE_RETURN_IF_ERROR(kind->Validate(spec));
  if (spec.dataset().train_limit() < 0) return bad("dataset.train_limit", "must be >= 0");
  if (spec.dataset().test_limit() < 0) return bad("dataset.test_limit", "must be >= 0");
  if (spec.num_workers() <= 0) return bad("num_workers", "must be positive");
  if (spec.num_shards() <= 0) return bad("num_shards", "must be positive");
  if (spec.global_batch() <= 0) return bad("global_batch", "must be positive");
  if (spec.global_batch() < spec.num_workers()) {
    return bad("global_batch", "(", spec.global_batch(), ") must be at least num_workers (",
               spec.num_workers(), "): every worker needs a share of it");
  }
  if (FindModeRules(spec.mode()) == nullptr) return bad("mode", "must be ", ModeEnumChoices());
  if (spec.stop().epochs() <= 0 && spec.stop().max_examples() <= 0) {
    return bad("stop", "needs epochs > 0 or max_examples > 0");
  }
  if (spec.stop().epochs() < 0 || spec.stop().max_examples() < 0) {
    return bad("stop", "values must be >= 0");
  }
  if (spec.block_size() <= 0) return bad("block_size", "must be positive");
  if (!(spec.checkpoint_interval_seconds() > 0)) {
    return bad("checkpoint_interval_seconds", "must be > 0");
  }
  if (!(spec.eval().interval_seconds() > 0)) return bad("eval.interval_seconds", "must be > 0");
  if (spec.eval().every_global_batches() < 0) {
    return bad("eval.every_global_batches", "must be >= 0 (0: chosen from the run's length)");
  }
  if (!spec.dataset().validation_path().empty() &&
      spec.dataset().kind() != v1::DatasetSpec::CRITEO) {
    return bad("dataset.validation_path", "is read for CRITEO datasets only");
  }
  if (spec.eval().early_stop() && spec.dataset().validation_path().empty()) {
    return bad("eval.early_stop", "needs dataset.validation_path (the test set never chooses)");
  }
  if (!v1::WirePrecision_IsValid(spec.wire_precision())) {
    return bad("wire_precision", "must be WIRE_FLOAT32 or WIRE_BFLOAT16");
  }
  for (const int trigger : spec.export_().on()) {
    if (trigger == v1::ExportSpec::TRIGGER_UNSPECIFIED ||
        !v1::ExportSpec::Trigger_IsValid(trigger)) {
      return bad("export.on", "must be KEPT, CHECKPOINT or END");
    }
    if (trigger == v1::ExportSpec::KEPT && spec.dataset().validation_path().empty()) {
      return bad("export.on",
                 "KEPT needs dataset.validation_path (a job without one keeps no "
                 "version)");
    }
  }
  if (spec.export_().keep() < 0) return bad("export.keep", "must be >= 0 (0: 3)");
  absl::StatusOr<std::unique_ptr<optim::Optimizer>> optimizer =
      optim::CreateOptimizer(spec.optimizer(), 1);
  if (!optimizer.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("job spec: ", optimizer.status().message()));
  }
  return absl::OkStatus();
}

std::string JobSpecToText(const v1::JobSpec& spec) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(spec, &text);
  return text;
}

int64_t TargetExamples(const v1::JobSpec& spec, int64_t train_examples) {
  int64_t target = INT64_MAX;
  if (spec.stop().epochs() > 0) target = spec.stop().epochs() * train_examples;
  if (spec.stop().max_examples() > 0) target = std::min(target, spec.stop().max_examples());
  return target;
}

int32_t LocalBatchShare(int32_t global_batch, int members, int index) {
  if (members <= 0) return 0;
  return global_batch / members + (index < global_batch % members ? 1 : 0);
}

void ResolveRunLength(v1::JobSpec& spec, int64_t train_examples) {
  v1::LearningRateSchedule* schedule = spec.mutable_optimizer()->mutable_schedule();
  const int64_t examples = TargetExamples(spec, train_examples);
  if (examples == INT64_MAX || spec.global_batch() <= 0) return;  // no length to resolve against
  const int64_t run = (examples + spec.global_batch() - 1) / spec.global_batch();
  if (spec.eval().every_global_batches() == 0) {
    const int64_t epoch = (train_examples + spec.global_batch() - 1) / spec.global_batch();
    spec.mutable_eval()->set_every_global_batches(EvalPointSpacing(run, epoch));
  }
  if (schedule->warmup_fraction() > 0) {
    schedule->set_warmup_updates(
        std::llround(static_cast<double>(schedule->warmup_fraction()) * static_cast<double>(run)));
    schedule->clear_warmup_fraction();
  }
  const bool decays = schedule->decay() == v1::LearningRateSchedule::COSINE ||
                      schedule->decay() == v1::LearningRateSchedule::LINEAR;
  if (!decays || schedule->total_updates() != 0) return;
  // A run shorter than its warmup keeps the warmup and decays over one more update.
  schedule->set_total_updates(std::max(run, schedule->warmup_updates() + 1));
}

}  // namespace syncopate::job
