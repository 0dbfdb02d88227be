// The PyTorch seam without a network: a module described once (layout, initial values, the
// training set's size), then trained and scored through the Workload interface, against plain
// PyTorch computing the same step in the same interpreter.
#include "libs/pytorch/torch_model.h"

#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "libs/job/job_spec.h"
#include "libs/job/model_kind.h"
#include "libs/pytorch/python_runtime.h"
#include "pybind11/embed.h"
#include "pybind11/numpy.h"
#include "pybind11/stl.h"

namespace syncopate::pytorch {
namespace {
namespace py = pybind11;
using ::testing::HasSubstr;

std::string TestData(const std::string& file) {
  return std::string(SYNCOPATE_TEST_DATA_DIR) + "/" + file;
}

v1::JobSpec TorchJob(const std::string& module) {
  v1::JobSpec job;
  job.set_job_id("torch-unit");
  job.mutable_model()->set_kind(v1::ModelSpec::TORCH);
  job.mutable_model()->mutable_torch()->set_module(module);
  job.mutable_optimizer()->set_kind(v1::OptimizerSpec::SGD);
  job.mutable_optimizer()->set_learning_rate(0.1f);
  job.set_global_batch(4);
  job.set_num_workers(1);
  job.set_num_shards(1);
  job.mutable_stop()->set_epochs(1);
  job.set_seed(7);
  job::ApplyJobDefaults(job);
  return job;
}

// The job as the coordinator hands it out: its layout recorded.
v1::JobSpec Resolved(v1::JobSpec job) {
  absl::StatusOr<job::ModelDescription> model = job::DescribeModel(job);
  EXPECT_TRUE(model.ok()) << model.status();
  if (model.ok()) *job.mutable_model()->mutable_layout() = job::LayoutRecord(model->layout);
  return job;
}

TEST(DescribeTorchModel, ReadsTheLayoutTheInitialValuesAndTheDataOffTheModule) {
  absl::StatusOr<TorchModelDescription> d = DescribeTorchModel(TorchJob(TestData("tiny_model.py")));
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->dense.size(), 4u);
  EXPECT_EQ(d->dense[0].name, "fc.weight");
  EXPECT_EQ(d->dense[0].shape, (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(d->dense[3].name, "out.bias");
  EXPECT_EQ(d->dense[3].size, 3);
  ASSERT_EQ(d->tables.size(), 1u);
  EXPECT_EQ(d->tables[0].name, "ids");
  EXPECT_EQ(d->tables[0].dim, 4);
  EXPECT_DOUBLE_EQ(d->tables[0].init_scale, 0.05);
  EXPECT_EQ(d->train_examples, 40);
  EXPECT_EQ(d->task, "classification");
  // The values are the module's as model() builds it after torch.manual_seed(job seed).
  ASSERT_EQ(d->initial_values.size(), 5u * 7 + 5 + 3 * 5 + 3);
  py::gil_scoped_acquire gil;
  py::object user = py::module_::import("syncopate.torch._host")
                        .attr("load_user_module")(TestData("tiny_model.py"));
  py::module_::import("torch").attr("manual_seed")(7);
  py::object module = user.attr("model")();
  const auto first =
      py::module_::import("torch")
          .attr("cat")(py::make_tuple(module.attr("fc").attr("weight").attr("reshape")(-1)))
          .attr("detach")()
          .attr("numpy")()
          .cast<py::array_t<float>>();
  EXPECT_EQ(std::memcmp(first.data(), d->initial_values.data(), 35 * sizeof(float)), 0);
}

// The TORCH row of the model-kind table: one describe of the module gives the shards' layout (its
// tensors PROVIDED by the module's values, its table's initializer) and the training set's size.
TEST(TorchModelKind, DescribesTheLayoutAndTheTrainingSetInOneCall) {
  v1::JobSpec job = TorchJob(TestData("tiny_model.py"));
  absl::StatusOr<job::ModelDescription> model = job::DescribeModel(job);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->train_examples, 40);
  ASSERT_EQ(model->layout.dense.size(), 4u);
  EXPECT_EQ(model->layout.dense[0].name, "fc.weight");
  EXPECT_EQ(model->layout.dense[0].size(), 35);
  EXPECT_EQ(model->layout.dense[0].init.kind(), v1::Initializer::PROVIDED);
  EXPECT_EQ(model->layout.dense_shapes[0], (std::vector<int64_t>{5, 7}));
  ASSERT_EQ(model->layout.tables.size(), 1u);
  EXPECT_EQ(model->layout.tables[0].name(), "ids");
  EXPECT_EQ(model->layout.tables[0].init().kind(), v1::Initializer::UNIFORM);
  EXPECT_EQ(model->layout.initial_values.size(), 5u * 7 + 5 + 3 * 5 + 3);
  job.mutable_dataset()->set_train_limit(10);
  EXPECT_EQ(job::DescribeModel(job)->train_examples, 10);
  job.mutable_model()->mutable_torch()->set_module("/nonexistent.py");
  EXPECT_EQ(job::DescribeModel(job).status().code(), absl::StatusCode::kInvalidArgument);
}

// Plain PyTorch's step on the same parameters, rows and examples: the module with an
// nn.EmbeddingBag holding exactly the pulled rows in place of the sharded table.
constexpr const char* kPlainStep = R"(
import numpy as np
import torch
from syncopate.torch._host import load_user_module
from syncopate.torch.data import DataSpec, collate

def plain_step(path, params, keys, rows, examples):
    user = load_user_module(path)
    model = user.model()
    flat = torch.from_numpy(np.array(params, dtype=np.float32))
    offset = 0
    for _, p in model.named_parameters():
        p.data = flat[offset:offset + p.numel()].view(p.shape).clone()
        offset += p.numel()
    bag = torch.nn.EmbeddingBag(len(keys), 4, mode="sum")
    bag.weight.data = torch.from_numpy(np.array(rows, dtype=np.float32)).view(-1, 4).clone()
    sorted_keys = torch.from_numpy(np.array(keys, dtype=np.uint64).view(np.int64))
    inputs, target = collate(user.train_dataset(DataSpec()), list(examples))
    index = torch.searchsorted(sorted_keys, inputs["ids"])
    h = torch.cat([inputs["dense"], bag(index)], dim=1)
    out = model.out(torch.relu(model.fc(h)))
    loss = torch.nn.functional.cross_entropy(out, target)
    loss.backward()
    grad = torch.cat([p.grad.reshape(-1) for _, p in model.named_parameters()])
    return float(loss), grad.numpy(), bag.weight.grad.reshape(-1).numpy()
)";

TEST(TorchWorkload, AStepsGradientIsBitIdenticalToPlainPyTorchs) {
  const v1::JobSpec job = Resolved(TorchJob(TestData("tiny_model.py")));
  absl::StatusOr<std::unique_ptr<workload::Workload>> w =
      job::CreateWorkload(job, workload::Purpose::kTrain);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ((*w)->table_dims(), (std::vector<int32_t>{4}));
  const std::vector<int64_t> examples = {3, 7, 1, 12, 30};
  ASSERT_TRUE((*w)->PrepareTrain(examples).ok());
  const std::vector<uint64_t> keys = (*w)->keys()[0];
  ASSERT_FALSE(keys.empty());
  EXPECT_LE(keys.size(), 10u);

  // Parameters and rows away from any initialisation, as a worker pulls them mid-run.
  std::vector<float> params((*w)->num_parameters());
  for (size_t i = 0; i < params.size(); ++i) params[i] = 0.1f * std::sin(1.0f + i);
  workload::TableRows rows(1, std::vector<float>(keys.size() * 4));
  for (size_t i = 0; i < rows[0].size(); ++i) rows[0][i] = 0.05f * std::cos(2.0f + i);
  std::vector<float> grad(params.size());
  workload::TableRows row_grads;
  absl::StatusOr<float> loss = (*w)->TrainStep(params, rows, grad, row_grads);
  ASSERT_TRUE(loss.ok()) << loss.status();

  py::gil_scoped_acquire gil;
  py::dict scope;
  py::exec(kPlainStep, scope);
  const py::tuple plain =
      scope["plain_step"](TestData("tiny_model.py"), params, keys, rows[0], examples);
  EXPECT_EQ(*loss, plain[0].cast<float>());
  const auto plain_grad = plain[1].cast<py::array_t<float>>();
  const auto plain_rows = plain[2].cast<py::array_t<float>>();
  ASSERT_EQ(static_cast<size_t>(plain_grad.size()), grad.size());
  EXPECT_EQ(std::memcmp(plain_grad.data(), grad.data(), grad.size() * sizeof(float)), 0)
      << "the dense gradient differs from plain PyTorch's in some bit";
  ASSERT_EQ(row_grads.size(), 1u);
  ASSERT_EQ(static_cast<size_t>(plain_rows.size()), row_grads[0].size());
  EXPECT_EQ(
      std::memcmp(plain_rows.data(), row_grads[0].data(), row_grads[0].size() * sizeof(float)), 0)
      << "the rows' gradient differs from plain PyTorch's in some bit";
}

TEST(TorchWorkload, ScoresTheTestSetInChunks) {
  const v1::JobSpec job = Resolved(TorchJob(TestData("tiny_model.py")));
  auto w = job::CreateWorkload(job, workload::Purpose::kEvaluate);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ((*w)->eval_size(), 30);
  std::vector<float> params((*w)->num_parameters(), 0.01f);
  for (int64_t begin : {0, 20}) {
    ASSERT_TRUE((*w)->PrepareEval(begin, std::min<int64_t>(begin + 20, 30)).ok());
    workload::TableRows rows(1, std::vector<float>((*w)->keys()[0].size() * 4, 0.0f));
    absl::Status scored = (*w)->ScoreEval(params, rows);
    ASSERT_TRUE(scored.ok()) << scored;
  }
  absl::StatusOr<model::Evaluation> e = (*w)->FinishEval();
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->examples, 30);
  EXPECT_GE(e->accuracy, 0.0);
  EXPECT_LE(e->accuracy, 1.0);
  // Every weight 0.01 and every row 0: the logits are equal up to rounding, so the loss is
  // log(3) to a few digits.
  EXPECT_NEAR(e->mean_loss, std::log(3.0), 1e-3);
  EXPECT_EQ((*w)->FinishEval().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(TorchWorkload, AModuleThatDiffersFromTheJobsLayoutIsRefusedWithOneLine) {
  v1::JobSpec job = Resolved(TorchJob(TestData("tiny_model.py")));
  job.mutable_model()->mutable_layout()->mutable_dense(0)->set_shape(1, 8);
  auto w = job::CreateWorkload(job, workload::Purpose::kTrain);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(w.status().message()),
              HasSubstr("does not match the job's model: parameter 0 is fc.weight [5, 7] here "
                        "and fc.weight [5, 8] in the job"));
  job = Resolved(TorchJob(TestData("tiny_model.py")));
  job.mutable_model()->mutable_layout()->mutable_tables(0)->set_dim(8);
  EXPECT_THAT(std::string(job::CreateWorkload(job, workload::Purpose::kTrain).status().message()),
              HasSubstr("table 0 is 'ids' of dim 4 here and 'ids' of dim 8 in the job"));
}

TEST(TorchWorkload, WhatThePythonCodeRaisesIsOnePermanentLine) {
  absl::StatusOr<TorchModelDescription> missing = DescribeTorchModel(TorchJob("/nonexistent.py"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("FileNotFoundError: model.torch.module '/nonexistent.py' is not a file"));

  const v1::JobSpec job = Resolved(TorchJob(TestData("raises.py")));
  auto w = job::CreateWorkload(job, workload::Purpose::kTrain);
  ASSERT_TRUE(w.ok()) << w.status();
  const std::vector<int64_t> examples = {0, 1, 2, 3};
  ASSERT_TRUE((*w)->PrepareTrain(examples).ok());
  std::vector<float> params((*w)->num_parameters()), grad(params.size());
  workload::TableRows rows, row_grads;
  absl::StatusOr<float> loss = (*w)->TrainStep(params, rows, grad, row_grads);
  EXPECT_EQ(loss.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(loss.status().message()),
              HasSubstr("ValueError: the model cannot take this batch"));
  EXPECT_EQ(std::string(loss.status().message()).find('\n'), std::string::npos);
}

}  // namespace
}  // namespace syncopate::pytorch
