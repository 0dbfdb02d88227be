// The shards' optimizers against torch.optim, element by element: a PyTorch model trained
// through the cluster takes the step its user would take with torch.optim (to 1 ulp), so its
// hyperparameters carry over unchanged.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "libs/isa/isa.h"
#include "libs/optim/update_rule.h"
#include "libs/pytorch/python_runtime.h"
#include "pybind11/embed.h"
#include "pybind11/numpy.h"
#include "pybind11/stl.h"

namespace syncopate::pytorch {
namespace {
namespace py = pybind11;

// Distance in units in the last place: how many floats lie between a and b.
int64_t UlpDistance(float a, float b) {
  auto ordered = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, sizeof(i));
    return i < 0 ? int64_t{INT32_MIN} - i : int64_t{i};
  };
  return std::abs(ordered(a) - ordered(b));
}

constexpr const char* kTorchSteps = R"(
import numpy as np
import torch

def torch_steps(kind, hp, params, grads):
    p = torch.nn.Parameter(torch.from_numpy(np.array(params, dtype=np.float32)))
    if kind == "sgd":
        opt = torch.optim.SGD([p], lr=hp["lr"], foreach=False)
    elif kind == "momentum":
        opt = torch.optim.SGD([p], lr=hp["lr"], momentum=hp["momentum"],
                              nesterov=hp["nesterov"], foreach=False)
    elif kind == "adagrad":
        opt = torch.optim.Adagrad([p], lr=hp["lr"], eps=hp["eps"],
                                  initial_accumulator_value=hp["acc"], foreach=False)
    else:
        opt = torch.optim.Adam([p], lr=hp["lr"], betas=(hp["b1"], hp["b2"]), eps=hp["eps"],
                               foreach=False)
    slots = {"sgd": [], "momentum": ["momentum_buffer"], "adagrad": ["sum"],
             "adam": ["exp_avg", "exp_avg_sq"]}[kind]
    after = []
    for g in grads:
        p.grad = torch.from_numpy(np.array(g, dtype=np.float32))
        opt.step()
        state = opt.state[p]
        after.append([p.detach().numpy().copy()] +
                     [state[name].numpy().copy() for name in slots])
    return after
)";

struct Case {
  std::string name;
  v1::OptimizerSpec spec;
  py::dict hyper;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  auto add = [&](const std::string& name, v1::OptimizerSpec::Kind kind, auto fill) {
    Case c{name, {}, {}};
    c.spec.set_kind(kind);
    fill(c.spec, c.hyper);
    cases.push_back(std::move(c));
  };
  add("sgd", v1::OptimizerSpec::SGD, [](v1::OptimizerSpec& s, py::dict& h) {
    s.set_learning_rate(0.1f);
    h["lr"] = 0.1f;
  });
  for (bool nesterov : {false, true}) {
    add(nesterov ? "nesterov" : "momentum", v1::OptimizerSpec::MOMENTUM,
        [nesterov](v1::OptimizerSpec& s, py::dict& h) {
          s.set_learning_rate(0.05f);
          s.set_momentum(0.9f);
          s.set_nesterov(nesterov);
          h["lr"] = 0.05f;
          h["momentum"] = 0.9f;
          h["nesterov"] = nesterov;
        });
  }
  add("adagrad", v1::OptimizerSpec::ADAGRAD, [](v1::OptimizerSpec& s, py::dict& h) {
    s.set_learning_rate(0.1f);
    s.set_epsilon(1e-7f);
    s.set_initial_accumulator(0.1f);
    h["lr"] = 0.1f;
    h["eps"] = 1e-7f;
    h["acc"] = 0.1f;
  });
  add("adam", v1::OptimizerSpec::ADAM, [](v1::OptimizerSpec& s, py::dict& h) {
    s.set_learning_rate(1e-3f);
    s.set_beta1(0.9f);
    s.set_beta2(0.999f);
    s.set_epsilon(1e-8f);
    h["lr"] = 1e-3f;
    h["b1"] = 0.9f;
    h["b2"] = 0.999f;
    h["eps"] = 1e-8f;
  });
  return cases;
}

// Every level this process can run that has FMA (x86-64-v3 and v4, what torch's own CPU kernels
// use on such a machine); the baseline level rounds fused multiply-adds twice and is not held to
// torch's rounding (update_kernels.h).
TEST(OptimizerParity, EveryRuleTakesTorchOptimsStepToOneUlp) {
  ASSERT_TRUE(EnsurePython().ok());
  std::vector<isa::IsaLevel> levels;
  for (isa::IsaLevel level : isa::SupportedIsaLevels()) {
    if (level != isa::IsaLevel::kBaseline) levels.push_back(level);
  }
  if (levels.empty()) GTEST_SKIP() << "this CPU has no FMA (x86-64-v3)";
  constexpr size_t kSize = 1003;  // not a multiple of any vector width: the tails too
  constexpr int kSteps = 5;
  std::mt19937 random(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> initial(kSize);
  for (float& x : initial) x = normal(random);
  std::vector<std::vector<float>> grads(kSteps, std::vector<float>(kSize));
  for (auto& g : grads) {
    for (float& x : g) x = 0.1f * normal(random);
  }
  grads[2][7] = 0.0f;  // a zero gradient, and a tiny one
  grads[3][9] = 1e-30f;

  py::gil_scoped_acquire gil;
  py::dict scope;
  py::exec(kTorchSteps, scope);
  for (isa::IsaLevel level : levels) {
    for (const Case& c : Cases()) {
      SCOPED_TRACE(absl::StrCat(c.name, " at ", isa::IsaLevelName(level)));
      absl::StatusOr<std::unique_ptr<optim::UpdateRule>> rule =
          optim::CreateUpdateRule(c.spec, level);
      ASSERT_TRUE(rule.ok()) << rule.status();
      std::vector<float> params = initial;
      std::vector<std::vector<float>> slot_values((*rule)->num_slots());
      std::vector<std::span<float>> slots;
      for (int s = 0; s < (*rule)->num_slots(); ++s) {
        slot_values[s].assign(kSize, (*rule)->slot_initial_value(s));
        slots.emplace_back(slot_values[s]);
      }
      const py::list torch_after =
          scope["torch_steps"](c.name == "nesterov" ? "momentum" : c.name, c.hyper, initial, grads);
      for (int step = 0; step < kSteps; ++step) {
        (*rule)->Apply(params, grads[step], slots, step + 1);
        const py::list expected = torch_after[step];
        const auto torch_params = expected[0].cast<py::array_t<float>>();
        int64_t worst = 0;
        for (size_t i = 0; i < kSize; ++i) {
          worst = std::max(worst, UlpDistance(params[i], torch_params.data()[i]));
        }
        EXPECT_LE(worst, 1) << "parameters after step " << step + 1;
        // Each step is compared from the same start: torch's parameters and optimizer state.
        std::memcpy(params.data(), torch_params.data(), kSize * sizeof(float));
        for (int s = 0; s < (*rule)->num_slots(); ++s) {
          const auto torch_slot = expected[s + 1].cast<py::array_t<float>>();
          int64_t slot_worst = 0;
          for (size_t i = 0; i < kSize; ++i) {
            slot_worst = std::max(slot_worst, UlpDistance(slot_values[s][i], torch_slot.data()[i]));
          }
          EXPECT_LE(slot_worst, 1) << "slot " << s << " after step " << step + 1;
          std::memcpy(slot_values[s].data(), torch_slot.data(), kSize * sizeof(float));
        }
      }
    }
  }
}

}  // namespace
}  // namespace syncopate::pytorch
