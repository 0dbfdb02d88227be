// Loading, defaulting and validating job specs (protobuf text format, see examples/).
// A bad spec fails with one line that names the field (or the line and column of a syntax
// error), so `syncopate-coordinator --job=...` fails at start rather than mid-run.
// Thread-safety: free functions, thread-safe.
#ifndef SYNCOPATE_LIBS_JOB_JOB_SPEC_H_
#define SYNCOPATE_LIBS_JOB_JOB_SPEC_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "libs/job/eval_points.h"
#include "syncopate/v1/job.pb.h"
#include "syncopate/v1/shard.pb.h"

namespace syncopate::job {

// The default job (examples/fashion_mnist_mlp.textproto, compiled in).
absl::string_view DefaultJobText();

// Parses protobuf text format into `message`: INVALID_ARGUMENT "<what>: line L:C: <error>" for
// the first syntax error (every text-proto spec of the project is read through here).
absl::Status ParseTextProto(absl::string_view text, absl::string_view what,
                            google::protobuf::Message& message);
// The whole content of a spec file; NOT_FOUND "<what> <path>: cannot open file".
absl::StatusOr<std::string> ReadSpecFile(const std::string& path, absl::string_view what);

// Parses text format, applies defaults and validates.
absl::StatusOr<v1::JobSpec> ParseJobSpec(absl::string_view text);
absl::StatusOr<v1::JobSpec> LoadJobSpecFile(const std::string& path);

// Fills unset optional fields (block size, eval interval, job id, and the model kind's own, e.g.
// the dataset dir).
void ApplyJobDefaults(v1::JobSpec& spec);
// INVALID_ARGUMENT naming the first offending field (the model and dataset sections are the
// model kind's to judge: job::ModelKind::Validate).
absl::Status ValidateJobSpec(const v1::JobSpec& spec);

// How the job's training workers encode dense pulls and pushes (its wire_precision; unset is
// float32). The evaluator always reads float32.
v1::DenseEncoding TrainingDenseEncoding(const v1::JobSpec& spec);

// Text format of a spec (what the launcher hands the coordinator).
std::string JobSpecToText(const v1::JobSpec& spec);

// Examples the job trains on before it stops, given the training set size.
int64_t TargetExamples(const v1::JobSpec& spec, int64_t train_examples);

// The local batch of the `index`-th of `members` workers (0-based, in membership order): G split
// as evenly as integers allow, so the shares always sum to exactly G (the coordinator and the
// simulator both split it here).
int32_t LocalBatchShare(int32_t global_batch, int members, int index);

// Resolves what depends on the run's length in global batches, ceil(TargetExamples / G): a
// COSINE or LINEAR total_updates left 0 becomes that length (the rate reaches its final value as
// the job ends), a warmup_fraction becomes warmup_updates, and an eval.every_global_batches left
// 0 becomes EvalPointSpacing(length, one epoch) (eval_points.h). The coordinator does it once,
// before shards and workers get the spec; without a stop condition nothing changes.
void ResolveRunLength(v1::JobSpec& spec, int64_t train_examples);

}  // namespace syncopate::job

#endif  // SYNCOPATE_LIBS_JOB_JOB_SPEC_H_
