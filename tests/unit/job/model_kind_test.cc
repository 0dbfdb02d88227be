#include "libs/job/model_kind.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "libs/job/job_spec.h"
#include "tests/unit/data/data_file_test.h"

namespace syncopate::job {
namespace {

using ::testing::HasSubstr;

// Every kind the wire contract names (but KIND_UNSPECIFIED) has exactly its own row.
TEST(ModelKind, EveryKindOfTheProtoHasItsRow) {
  const google::protobuf::EnumDescriptor* kinds = v1::ModelSpec::Kind_descriptor();
  for (int i = 0; i < kinds->value_count(); ++i) {
    const auto kind = static_cast<v1::ModelSpec::Kind>(kinds->value(i)->number());
    if (kind == v1::ModelSpec::KIND_UNSPECIFIED) continue;
    absl::StatusOr<const ModelKind*> row = FindModelKind(kind);
    ASSERT_TRUE(row.ok()) << kinds->value(i)->name() << ": " << row.status();
    EXPECT_EQ((*row)->kind(), kind);
    EXPECT_EQ((*row)->name(), kinds->value(i)->name());
  }
}

TEST(ModelKind, AKindWithoutARowIsOneLineNamingTheChoices) {
  absl::StatusOr<const ModelKind*> row = FindModelKind(v1::ModelSpec::KIND_UNSPECIFIED);
  EXPECT_EQ(row.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(row.status().message()),
              HasSubstr("model.kind must be one of MLP, WDL, DEEPFM, DCN"));
  v1::JobSpec job;
  EXPECT_EQ(DescribeModel(job).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BuiltinLayoutForJob(job).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateWorkload(job, workload::Purpose::kTrain).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ModelKind, QualityIsAccuracyForClassifiersAndAucForClickThroughModels) {
  v1::JobSpec job;
  job.mutable_model()->set_kind(v1::ModelSpec::MLP);
  EXPECT_EQ(QualityMetric(job), "accuracy");
  for (v1::ModelSpec::Kind kind : {v1::ModelSpec::WDL, v1::ModelSpec::DEEPFM, v1::ModelSpec::DCN}) {
    job.mutable_model()->set_kind(kind);
    EXPECT_EQ(QualityMetric(job), "auc") << v1::ModelSpec::Kind_Name(kind);
  }
}

// The layout is the kind's: the default job's MLP has only dense tensors (784-256-128-10), a CTR
// model its two tables with the job's admission and eviction on each.
TEST(ModelKind, BuiltinLayoutComesFromTheKindsModel) {
  absl::StatusOr<v1::JobSpec> mlp_job = ParseJobSpec(DefaultJobText());
  ASSERT_TRUE(mlp_job.ok()) << mlp_job.status();
  absl::StatusOr<ModelLayout> mlp = BuiltinLayoutForJob(*mlp_job);
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  int64_t parameters = 0;
  for (const model::DenseTensorSpec& t : mlp->dense) parameters += t.size();
  EXPECT_EQ(parameters, 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
  EXPECT_TRUE(mlp->tables.empty());

  v1::JobSpec ctr = *mlp_job;
  ctr.mutable_model()->set_kind(v1::ModelSpec::DEEPFM);
  ctr.mutable_model()->set_admit_after_count(3);
  ctr.mutable_dataset()->set_kind(v1::DatasetSpec::CRITEO);
  ApplyJobDefaults(ctr);
  absl::StatusOr<ModelLayout> deepfm = BuiltinLayoutForJob(ctr);
  ASSERT_TRUE(deepfm.ok()) << deepfm.status();
  ASSERT_EQ(deepfm->tables.size(), 2u);
  for (const v1::EmbeddingTableSpec& table : deepfm->tables) {
    EXPECT_EQ(table.admit_after_count(), 3) << table.name();
  }
}

// Only a TORCH job's module says its layout: the spec alone cannot.
TEST(ModelKind, TorchHasNoBuiltinLayout) {
  v1::JobSpec job;
  job.mutable_model()->set_kind(v1::ModelSpec::TORCH);
  absl::StatusOr<ModelLayout> layout = BuiltinLayoutForJob(job);
  EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(layout.status().message()), HasSubstr("model TORCH is not built in"));
}

// DescribeModel against small files: each built-in kind's layout and its training set's size in
// one record.
class DescribeModelTest : public data::DataFileTest {
 protected:
  // An IDX labels file of `count` examples (magic 0x801, the count, big-endian; then the labels):
  // what the MLP's count reads. A plain file under the .gz name: zlib reads it as it is.
  void WriteMnistTrainLabels(uint8_t count) {
    WritePlain("train-labels-idx1-ubyte.gz",
               absl::StrCat(std::string("\0\0\x08\x01\0\0\0", 7), std::string(1, count),
                            std::string(count, '\3')));
  }
  // `count` Criteo lines (label, 13 numeric and 26 categorical fields).
  std::string WriteCriteo(const std::string& name, int count) {
    std::string text;
    for (int i = 0; i < count; ++i) {
      absl::StrAppend(&text, i % 2, std::string(13, '\t'), "\t", absl::Hex(i + 1),
                      std::string(25, '\t'), "\n");
    }
    return WritePlain(name, text);
  }
  v1::JobSpec MlpJob() {
    v1::JobSpec job = *ParseJobSpec(DefaultJobText());
    job.mutable_dataset()->set_dir(dir_.string());
    return job;
  }
  v1::JobSpec CtrJob(v1::ModelSpec::Kind kind) {
    v1::JobSpec job = MlpJob();
    job.mutable_model()->Clear();
    job.mutable_model()->set_kind(kind);
    job.mutable_dataset()->Clear();
    job.mutable_dataset()->set_kind(v1::DatasetSpec::CRITEO);
    job.mutable_dataset()->set_train_path(WriteCriteo("train.tsv", 5));
    job.mutable_dataset()->set_test_path(WriteCriteo("test.tsv", 2));
    ApplyJobDefaults(job);
    EXPECT_TRUE(ValidateJobSpec(job).ok()) << ValidateJobSpec(job);
    return job;
  }
};

TEST_F(DescribeModelTest, EachBuiltinKindDescribesItsLayoutAndItsTrainingSet) {
  WriteMnistTrainLabels(7);
  v1::JobSpec mlp = MlpJob();
  absl::StatusOr<ModelDescription> described = DescribeModel(mlp);
  ASSERT_TRUE(described.ok()) << described.status();
  EXPECT_EQ(described->train_examples, 7);
  EXPECT_EQ(LayoutRecord(described->layout).DebugString(),
            LayoutRecord(*BuiltinLayoutForJob(mlp)).DebugString());
  // train_limit bounds what the leases cover.
  mlp.mutable_dataset()->set_train_limit(4);
  EXPECT_EQ(DescribeModel(mlp)->train_examples, 4);

  for (v1::ModelSpec::Kind kind : {v1::ModelSpec::WDL, v1::ModelSpec::DEEPFM, v1::ModelSpec::DCN}) {
    v1::JobSpec ctr = CtrJob(kind);
    described = DescribeModel(ctr);
    ASSERT_TRUE(described.ok()) << v1::ModelSpec::Kind_Name(kind) << ": " << described.status();
    EXPECT_EQ(described->train_examples, 5) << v1::ModelSpec::Kind_Name(kind);
    EXPECT_FALSE(described->layout.tables.empty()) << v1::ModelSpec::Kind_Name(kind);
    EXPECT_EQ(LayoutRecord(described->layout).DebugString(),
              LayoutRecord(*BuiltinLayoutForJob(ctr)).DebugString())
        << v1::ModelSpec::Kind_Name(kind);
  }
}

TEST_F(DescribeModelTest, DataThatCannotTrainFailsTheDescription) {
  // No Fashion-MNIST where the job says.
  absl::StatusOr<ModelDescription> described = DescribeModel(MlpJob());
  EXPECT_FALSE(described.ok());
  EXPECT_THAT(std::string(described.status().message()), HasSubstr("train-labels-idx1-ubyte.gz"));
  // An empty training set.
  WriteMnistTrainLabels(0);
  described = DescribeModel(MlpJob());
  EXPECT_EQ(described.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(described.status().message()), HasSubstr("holds no examples"));
  // A CTR job's validation set is read at once, not by its evaluator later.
  v1::JobSpec ctr = CtrJob(v1::ModelSpec::WDL);
  ctr.mutable_dataset()->set_validation_path(PathOf("missing.tsv"));
  described = DescribeModel(ctr);
  EXPECT_FALSE(described.ok());
  EXPECT_THAT(std::string(described.status().message()), HasSubstr("missing.tsv"));
}

}  // namespace
}  // namespace syncopate::job
