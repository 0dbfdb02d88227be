#include "libs/job/model_kind.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "libs/job/job_spec.h"

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
  EXPECT_EQ(LayoutForJob(job).status().code(), absl::StatusCode::kInvalidArgument);
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
TEST(ModelKind, LayoutComesFromTheKindsModel) {
  absl::StatusOr<v1::JobSpec> mlp_job = ParseJobSpec(DefaultJobText());
  ASSERT_TRUE(mlp_job.ok()) << mlp_job.status();
  absl::StatusOr<ModelLayout> mlp = LayoutForJob(*mlp_job);
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
  absl::StatusOr<ModelLayout> deepfm = LayoutForJob(ctr);
  ASSERT_TRUE(deepfm.ok()) << deepfm.status();
  ASSERT_EQ(deepfm->tables.size(), 2u);
  for (const v1::EmbeddingTableSpec& table : deepfm->tables) {
    EXPECT_EQ(table.admit_after_count(), 3) << table.name();
  }
}

}  // namespace
}  // namespace syncopate::job
