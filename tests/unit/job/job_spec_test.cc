#include "libs/job/job_spec.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "libs/common/mode_rules.h"
#include "libs/job/model_kind.h"
#include "libs/job/partitioner.h"

namespace syncopate::job {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// The smallest spec that validates; every field the defaults fill is left unset.
constexpr char kMinimalJob[] = R"pb(
  model { kind: MLP }
  dataset { kind: FASHION_MNIST }
  optimizer { kind: SGD learning_rate: 0.1 }
  global_batch: 8
  num_workers: 2
  num_shards: 1
  stop { epochs: 1 }
)pb";

v1::JobSpec ValidSpec() {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(kMinimalJob);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

// Validating `spec` fails with INVALID_ARGUMENT whose message names `field`.
void ExpectRejectsField(const v1::JobSpec& spec, const std::string& field) {
  absl::Status status = ValidateJobSpec(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("job spec: " + field)) << status;
}

TEST(ParseJobSpec, DefaultJobParsesAndValidates) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(DefaultJobText());
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->job_id(), "fashion-mnist-mlp");
  EXPECT_EQ(spec->model().kind(), v1::ModelSpec::MLP);
  EXPECT_THAT(spec->model().hidden(), ElementsAre(256, 128));
  EXPECT_EQ(spec->optimizer().kind(), v1::OptimizerSpec::MOMENTUM);
  EXPECT_EQ(spec->global_batch(), 256);
  EXPECT_EQ(spec->num_workers(), 4);
  EXPECT_EQ(spec->num_shards(), 2);
  EXPECT_EQ(spec->mode(), v1::MODE_SYNC);
  EXPECT_EQ(spec->stop().epochs(), 8);
  EXPECT_TRUE(ValidateJobSpec(*spec).ok());
}

TEST(ParseJobSpec, CtrExampleParsesValidatesAndPartitionsWithTables) {
  absl::StatusOr<v1::JobSpec> spec =
      LoadJobSpecFile(std::string(SYNCOPATE_SOURCE_DIR) + "/examples/ctr_wdl.textproto");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->model().kind(), v1::ModelSpec::WDL);
  EXPECT_EQ(spec->model().embedding_dim(), 16);
  EXPECT_EQ(spec->model().numeric_missing(), v1::ModelSpec::MISSING_INDICATOR);
  EXPECT_EQ(spec->optimizer().kind(), v1::OptimizerSpec::ADAGRAD);
  EXPECT_EQ(spec->mode(), v1::MODE_AUTO);
  absl::StatusOr<ModelLayout> layout = BuiltinLayoutForJob(*spec);
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(layout->tables.size(), 2u);
  // The missing indicators are 13 more numeric inputs (ADR 0016): MISSING_AS_ZERO's layout is
  // the first release's, 13 x (64 + 1) floats smaller for this WDL (MLP 64-32, linear part).
  v1::JobSpec as_zero = *spec;
  as_zero.mutable_model()->set_numeric_missing(v1::ModelSpec::MISSING_AS_ZERO);
  absl::StatusOr<ModelLayout> zero_layout = BuiltinLayoutForJob(as_zero);
  ASSERT_TRUE(zero_layout.ok()) << zero_layout.status();
  auto dense_size = [](const ModelLayout& l) {
    int64_t size = 0;
    for (const auto& t : l.dense) size += t.size();
    return size;
  };
  EXPECT_EQ(dense_size(*layout) - dense_size(*zero_layout), 13 * (64 + 1));
  as_zero.mutable_model()->set_numeric_missing(static_cast<v1::ModelSpec::NumericMissing>(7));
  EXPECT_THAT(std::string(ValidateJobSpec(as_zero).message()), HasSubstr("model.numeric_missing"));
  absl::StatusOr<std::vector<v1::ShardPartition>> partitions = PartitionModel(*layout, 2);
  ASSERT_TRUE(partitions.ok());
  for (const v1::ShardPartition& p : *partitions) EXPECT_EQ(p.tables_size(), 2);
}

// The three CTR examples parse, validate and lay out their tables; none lists a cross (they must
// not depend on knowing the generator's planted pairs).
TEST(ParseJobSpec, EveryCtrExampleParsesWithoutCrosses) {
  for (const auto& [file, kind] : {std::pair{"ctr_wdl", v1::ModelSpec::WDL},
                                   {"ctr_deepfm", v1::ModelSpec::DEEPFM},
                                   {"ctr_dcn", v1::ModelSpec::DCN}}) {
    absl::StatusOr<v1::JobSpec> spec =
        LoadJobSpecFile(std::string(SYNCOPATE_SOURCE_DIR) + "/examples/" + file + ".textproto");
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_EQ(spec->model().kind(), kind) << file;
    EXPECT_EQ(spec->model().wide_crosses_size(), 0) << file;
    absl::StatusOr<ModelLayout> layout = BuiltinLayoutForJob(*spec);
    ASSERT_TRUE(layout.ok()) << layout.status();
    EXPECT_EQ(layout->tables.size(), 2u) << file;
  }
}

TEST(ValidateJobSpec, WdlNeedsCriteoDataAndValidCrosses) {
  absl::StatusOr<v1::JobSpec> spec =
      LoadJobSpecFile(std::string(SYNCOPATE_SOURCE_DIR) + "/examples/ctr_wdl.textproto");
  ASSERT_TRUE(spec.ok()) << spec.status();
  v1::FieldCross* cross = spec->mutable_model()->add_wide_crosses();
  cross->set_first(23);
  cross->set_second(20);
  EXPECT_TRUE(ValidateJobSpec(*spec).ok());
  v1::JobSpec bad = *spec;
  bad.mutable_model()->mutable_wide_crosses(0)->set_second(23);  // a column crossed with itself
  EXPECT_THAT(std::string(ValidateJobSpec(bad).message()), HasSubstr("model.wide_crosses"));
  bad = *spec;
  bad.mutable_model()->mutable_wide_crosses(0)->set_first(27);
  EXPECT_THAT(std::string(ValidateJobSpec(bad).message()), HasSubstr("model.wide_crosses"));
  bad = *spec;
  bad.mutable_dataset()->set_kind(v1::DatasetSpec::FASHION_MNIST);
  EXPECT_THAT(std::string(ValidateJobSpec(bad).message()), HasSubstr("dataset.kind"));
  bad = *spec;
  bad.mutable_dataset()->clear_test_path();
  EXPECT_THAT(std::string(ValidateJobSpec(bad).message()), HasSubstr("dataset.test_path"));
}

// DEEPFM and DCN share WDL's checks; cross_layers belongs to DCN alone and gets a default.
TEST(ValidateJobSpec, DeepFmAndDcnShareTheCtrChecksAndCrossLayersIsDcnOnly) {
  absl::StatusOr<v1::JobSpec> spec =
      LoadJobSpecFile(std::string(SYNCOPATE_SOURCE_DIR) + "/examples/ctr_wdl.textproto");
  ASSERT_TRUE(spec.ok()) << spec.status();
  v1::JobSpec deepfm = *spec;
  deepfm.mutable_model()->set_kind(v1::ModelSpec::DEEPFM);
  EXPECT_TRUE(ValidateJobSpec(deepfm).ok());
  deepfm.mutable_model()->set_cross_layers(2);
  EXPECT_THAT(std::string(ValidateJobSpec(deepfm).message()),
              HasSubstr("model.cross_layers is only for model DCN"));
  deepfm.mutable_model()->set_cross_layers(0);
  // The FM pairs the categorical fields only unless asked (ADR 0020); fm_fields is DeepFM's.
  v1::JobSpec defaulted = deepfm;
  ApplyJobDefaults(defaulted);
  EXPECT_EQ(defaulted.model().fm_fields(), v1::ModelSpec::CATEGORICAL_ONLY);
  absl::StatusOr<ModelLayout> fm_layout = BuiltinLayoutForJob(defaulted);
  ASSERT_TRUE(fm_layout.ok()) << fm_layout.status();
  EXPECT_FALSE(std::any_of(fm_layout->dense.begin(), fm_layout->dense.end(),
                           [](const auto& t) { return t.name == "fm/numeric"; }));
  defaulted.mutable_model()->set_fm_fields(v1::ModelSpec::CATEGORICAL_AND_NUMERIC);
  fm_layout = BuiltinLayoutForJob(defaulted);
  ASSERT_TRUE(fm_layout.ok()) << fm_layout.status();
  EXPECT_TRUE(std::any_of(fm_layout->dense.begin(), fm_layout->dense.end(),
                          [](const auto& t) { return t.name == "fm/numeric"; }));
  v1::JobSpec wdl = *spec;
  wdl.mutable_model()->set_fm_fields(v1::ModelSpec::CATEGORICAL_ONLY);
  EXPECT_THAT(std::string(ValidateJobSpec(wdl).message()),
              HasSubstr("model.fm_fields is only for model DEEPFM"));
  // DCN's cross layers likewise cross the embeddings only unless asked (ADR 0021).
  v1::JobSpec crossed = *spec;
  crossed.mutable_model()->set_kind(v1::ModelSpec::DCN);
  ApplyJobDefaults(crossed);
  EXPECT_EQ(crossed.model().cross_fields(), v1::ModelSpec::CATEGORICAL_ONLY);
  EXPECT_TRUE(ValidateJobSpec(crossed).ok()) << ValidateJobSpec(crossed);
  wdl.mutable_model()->clear_fm_fields();
  wdl.mutable_model()->set_cross_fields(v1::ModelSpec::CATEGORICAL_AND_NUMERIC);
  EXPECT_THAT(std::string(ValidateJobSpec(wdl).message()),
              HasSubstr("model.cross_fields is only for model DCN"));
  deepfm.mutable_dataset()->set_kind(v1::DatasetSpec::FASHION_MNIST);
  EXPECT_THAT(std::string(ValidateJobSpec(deepfm).message()),
              HasSubstr("dataset.kind must be CRITEO for model DEEPFM"));

  v1::JobSpec dcn = *spec;
  dcn.mutable_model()->set_kind(v1::ModelSpec::DCN);
  ApplyJobDefaults(dcn);
  EXPECT_EQ(dcn.model().cross_layers(), 2);
  EXPECT_TRUE(ValidateJobSpec(dcn).ok());
  absl::StatusOr<ModelLayout> layout = BuiltinLayoutForJob(dcn);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->tables.size(), 2u);
  dcn.mutable_model()->set_cross_layers(17);
  EXPECT_THAT(std::string(ValidateJobSpec(dcn).message()),
              HasSubstr("model.cross_layers must be in [1, 16] for DCN, got 17"));
}

// Admission and eviction (ADR 0010): off by default, one error line for a bad value, and every
// table of the layout carries them to the shards.
TEST(ValidateJobSpec, RowLimitsAreCheckedAndReachEveryTable) {
  absl::StatusOr<v1::JobSpec> spec =
      LoadJobSpecFile(std::string(SYNCOPATE_SOURCE_DIR) + "/examples/ctr_wdl.textproto");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->model().admit_after_count(), 0);
  EXPECT_EQ(spec->model().evict_after_updates(), 0);
  v1::JobSpec job = *spec;
  job.mutable_model()->set_admit_after_count(256);
  EXPECT_EQ(ValidateJobSpec(job).message(),
            "job spec: model.admit_after_count must be in [0, 255] (0 = every key at first "
            "sight), got 256");
  job.mutable_model()->set_admit_after_count(-1);
  ExpectRejectsField(job, "model.admit_after_count");
  job.mutable_model()->set_admit_after_count(4);
  job.mutable_model()->set_evict_after_updates(-5);
  ExpectRejectsField(job, "model.evict_after_updates");
  job.mutable_model()->set_evict_after_updates(2000);
  ASSERT_TRUE(ValidateJobSpec(job).ok());
  absl::StatusOr<ModelLayout> layout = BuiltinLayoutForJob(job);
  ASSERT_TRUE(layout.ok()) << layout.status();
  for (const v1::EmbeddingTableSpec& table : layout->tables) {
    EXPECT_EQ(table.admit_after_count(), 4) << table.name();
    EXPECT_EQ(table.evict_after_updates(), 2000) << table.name();
  }
  v1::JobSpec mlp = ValidSpec();
  mlp.mutable_model()->set_evict_after_updates(10);
  ExpectRejectsField(mlp, "model.admit_after_count and evict_after_updates");
}

TEST(ParseJobSpec, AppliesDefaultsToUnsetFields) {
  v1::JobSpec spec = ValidSpec();
  EXPECT_EQ(spec.job_id(), "job");
  EXPECT_EQ(spec.dataset().dir(), "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(spec.block_size(), 1000);
  EXPECT_EQ(spec.eval().interval_seconds(), 5);
  EXPECT_EQ(spec.mode(), v1::MODE_SYNC);
  EXPECT_EQ(spec.seed(), 1u);
}

TEST(ParseJobSpec, SyntaxErrorNamesLineAndColumn) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec("global_batch: 8\nnum_workers: two\n");
  ASSERT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), StartsWith("job spec: line 2:14: "));
}

TEST(ParseJobSpec, UnknownFieldNamesLineAndColumn) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec("global_batch: 8\n  bogus: 1\n");
  ASSERT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), StartsWith("job spec: line 2:"));
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("bogus"));
}

TEST(ValidateJobSpec, GlobalBatchSmallerThanWorkersNamesGlobalBatch) {
  v1::JobSpec spec = ValidSpec();
  spec.set_global_batch(1);
  ExpectRejectsField(spec, "global_batch");
  spec.set_global_batch(2);  // exactly one sample per worker is enough
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
}

TEST(ValidateJobSpec, MissingStopNamesStop) {
  v1::JobSpec spec = ValidSpec();
  spec.clear_stop();
  ExpectRejectsField(spec, "stop");
  spec.mutable_stop()->set_max_examples(10);
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
  spec.mutable_stop()->set_epochs(-1);
  ExpectRejectsField(spec, "stop");
}

TEST(ValidateJobSpec, BadOptimizerNamesOptimizerField) {
  v1::JobSpec spec = ValidSpec();
  spec.mutable_optimizer()->set_kind(v1::OptimizerSpec::KIND_UNSPECIFIED);
  ExpectRejectsField(spec, "optimizer.kind");
  spec.mutable_optimizer()->set_kind(v1::OptimizerSpec::MOMENTUM);
  spec.mutable_optimizer()->set_momentum(1.0f);
  ExpectRejectsField(spec, "optimizer.momentum");
}

TEST(ValidateJobSpec, BadModeNamesMode) {
  v1::JobSpec spec = ValidSpec();
  spec.set_mode(static_cast<v1::Mode>(42));
  EXPECT_EQ(ValidateJobSpec(spec).message(),
            "job spec: mode must be MODE_SYNC, MODE_GBA, MODE_ASYNC or MODE_AUTO");
  spec.set_mode(v1::MODE_UNSPECIFIED);  // defaults turn it into sync; validation alone does not
  ExpectRejectsField(spec, "mode");
  for (const ModeRules& row : kModeRules) {  // every mode of the table is a job's
    spec.set_mode(row.mode);
    EXPECT_TRUE(ValidateJobSpec(spec).ok()) << row.name;
  }
}

// A validation set is a CRITEO dataset's path; early stopping needs one (the test set never
// chooses).
TEST(ValidateJobSpec, ValidationPathIsCriteosAndEarlyStopNeedsIt) {
  v1::JobSpec spec = ValidSpec();  // Fashion-MNIST
  spec.mutable_dataset()->set_validation_path("val.tsv");
  ExpectRejectsField(spec, "dataset.validation_path");
  spec.mutable_dataset()->clear_validation_path();
  spec.mutable_eval()->set_early_stop(true);
  ExpectRejectsField(spec, "eval.early_stop");

  absl::StatusOr<v1::JobSpec> ctr =
      LoadJobSpecFile(std::string(SYNCOPATE_SOURCE_DIR) + "/examples/ctr_wdl.textproto");
  ASSERT_TRUE(ctr.ok()) << ctr.status();
  ctr->mutable_eval()->set_early_stop(true);
  ExpectRejectsField(*ctr, "eval.early_stop");
  ctr->mutable_dataset()->set_validation_path("val.tsv");
  EXPECT_TRUE(ValidateJobSpec(*ctr).ok());
}

// Unset and WIRE_FLOAT32 are float32 on the wire; only WIRE_BFLOAT16 rounds.
TEST(TrainingDenseEncoding, FollowsTheJobsWirePrecision) {
  v1::JobSpec spec = ValidSpec();
  EXPECT_EQ(TrainingDenseEncoding(spec), v1::DENSE_FLOAT32);
  spec.set_wire_precision(v1::WIRE_FLOAT32);
  EXPECT_EQ(TrainingDenseEncoding(spec), v1::DENSE_FLOAT32);
  spec.set_wire_precision(v1::WIRE_BFLOAT16);
  EXPECT_EQ(TrainingDenseEncoding(spec), v1::DENSE_BFLOAT16);
  EXPECT_TRUE(ValidateJobSpec(spec).ok());
}

TEST(ValidateJobSpec, EveryOtherRuleNamesItsField) {
  struct Case {
    std::string field;
    void (*breaks)(v1::JobSpec&);
  };
  const Case cases[] = {
      {"model.kind", [](v1::JobSpec& s) { s.mutable_model()->clear_kind(); }},
      {"model.hidden", [](v1::JobSpec& s) { s.mutable_model()->add_hidden(0); }},
      {"dataset.kind", [](v1::JobSpec& s) { s.mutable_dataset()->clear_kind(); }},
      {"dataset.train_limit", [](v1::JobSpec& s) { s.mutable_dataset()->set_train_limit(-1); }},
      {"dataset.test_limit", [](v1::JobSpec& s) { s.mutable_dataset()->set_test_limit(-1); }},
      {"num_workers", [](v1::JobSpec& s) { s.set_num_workers(0); }},
      {"num_shards", [](v1::JobSpec& s) { s.set_num_shards(0); }},
      {"global_batch", [](v1::JobSpec& s) { s.set_global_batch(0); }},
      {"block_size", [](v1::JobSpec& s) { s.set_block_size(-5); }},
      {"eval.interval_seconds", [](v1::JobSpec& s) { s.mutable_eval()->set_interval_seconds(-1); }},
      {"wire_precision",
       [](v1::JobSpec& s) { s.set_wire_precision(static_cast<v1::WirePrecision>(9)); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.field);
    v1::JobSpec spec = ValidSpec();
    c.breaks(spec);
    ExpectRejectsField(spec, c.field);
  }
}

TEST(ParseJobSpec, ValidationFailureIsReportedByParse) {
  absl::StatusOr<v1::JobSpec> spec =
      ParseJobSpec(absl::StrReplaceAll(kMinimalJob, {{"global_batch: 8", "global_batch: 1"}}));
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("job spec: global_batch"));
}

TEST(JobSpecToText, RoundTrips) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(DefaultJobText());
  ASSERT_TRUE(spec.ok());
  absl::StatusOr<v1::JobSpec> again = ParseJobSpec(JobSpecToText(*spec));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*spec, *again));
}

TEST(LoadJobSpecFile, MissingFileIsNotFound) {
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpecFile("/nonexistent/syncopate/job.textproto");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
}

TEST(LoadJobSpecFile, ErrorsArePrefixedWithThePath) {
  const std::string path = ::testing::TempDir() + "/job_spec_test_bad.textproto";
  {
    std::ofstream out(path);
    out << absl::StrReplaceAll(kMinimalJob, {{"num_shards: 1", "num_shards: 0"}});
  }
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpecFile(path);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), StartsWith(path + ": job spec: num_shards"));
  std::remove(path.c_str());
}

TEST(TargetExamples, FirstStopConditionReachedWins) {
  v1::JobSpec spec;
  spec.mutable_stop()->set_epochs(5);
  EXPECT_EQ(TargetExamples(spec, 100), 500);
  spec.mutable_stop()->set_max_examples(40);
  EXPECT_EQ(TargetExamples(spec, 100), 40);
  spec.mutable_stop()->set_max_examples(600);
  EXPECT_EQ(TargetExamples(spec, 100), 500);
  spec.mutable_stop()->set_epochs(0);
  EXPECT_EQ(TargetExamples(spec, 100), 600);
}

// The default job's schedule holds no number tied to the dataset: the coordinator derives the
// warmup and the decay's length from the stop condition, for runs of any length.
TEST(ResolveRunLength, DerivesWarmupAndLengthFromTheRun) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(DefaultJobText());
  ASSERT_TRUE(spec.ok()) << spec.status();
  v1::JobSpec eight_epochs = *spec;
  ResolveRunLength(eight_epochs, 60000);  // 8 epochs x 60000 / 256 = 1875 updates
  EXPECT_EQ(eight_epochs.optimizer().schedule().total_updates(), 1875);
  EXPECT_EQ(eight_epochs.optimizer().schedule().warmup_updates(), 94);  // 5%
  EXPECT_EQ(eight_epochs.optimizer().schedule().warmup_fraction(), 0);
  v1::JobSpec short_run = *spec;
  short_run.mutable_stop()->set_epochs(1);
  ResolveRunLength(short_run, 4000);  // 16 updates
  EXPECT_EQ(short_run.optimizer().schedule().total_updates(), 16);
  EXPECT_EQ(short_run.optimizer().schedule().warmup_updates(), 1);
  // An explicit length is kept; a constant schedule gets no length.
  v1::JobSpec constant = *spec;
  constant.mutable_optimizer()->mutable_schedule()->set_decay(v1::LearningRateSchedule::CONSTANT);
  ResolveRunLength(constant, 60000);
  EXPECT_EQ(constant.optimizer().schedule().total_updates(), 0);
}

// Evaluation points: ~kEvalPointsPerRun of them whatever the run's length, unless the job says.
TEST(ResolveRunLength, SpacesEvaluationPointsOverTheRun) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(DefaultJobText());
  ASSERT_TRUE(spec.ok()) << spec.status();
  v1::JobSpec long_run = *spec;
  ResolveRunLength(long_run, 60000);  // 1875 updates
  EXPECT_EQ(long_run.eval().every_global_batches(), 1875 / kEvalPointsPerRun);
  EXPECT_GE(1875 / long_run.eval().every_global_batches(), 20);
  v1::JobSpec tiny = *spec;
  tiny.mutable_stop()->set_epochs(1);
  ResolveRunLength(tiny, 2000);  // 8 updates: a point after each
  EXPECT_EQ(tiny.eval().every_global_batches(), 1);
  v1::JobSpec endless = *spec;
  endless.mutable_stop()->set_epochs(1000);
  ResolveRunLength(endless, 60000);  // 234,375 updates: a point per epoch, not every 9,375
  EXPECT_EQ(endless.eval().every_global_batches(), 60000 / 256 + 1);
  v1::JobSpec chosen = *spec;
  chosen.mutable_eval()->set_every_global_batches(7);
  ResolveRunLength(chosen, 60000);
  EXPECT_EQ(chosen.eval().every_global_batches(), 7);
  v1::JobSpec negative = *spec;
  negative.mutable_eval()->set_every_global_batches(-1);
  EXPECT_THAT(std::string(ValidateJobSpec(negative).message()),
              HasSubstr("eval.every_global_batches"));
}

}  // namespace
}  // namespace syncopate::job
