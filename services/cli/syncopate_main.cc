// syncopate: the user's command line. Wiring only: the flags (defined here so `syncopate --help`
// lists them) and the dispatch to one file per command.
//   syncopate local  [flags]              train a job on a local cluster of child processes
//   syncopate status --coordinator=H:P     live view of a running cluster
//   syncopate release --coordinator=H:P    start a job held by the coordinator's --hold_start
//   syncopate health --address=H:P         exit 0 iff the server's gRPC health check says SERVING
//   syncopate datagen ctr --rows=N --out=F  a synthetic Criteo-format click file
//   syncopate sim --sim=SPEC [--job=J]      the job simulated in virtual time (libs/sim)
//   syncopate export --from=D --out=E       a job's checkpoints as files users load
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "libs/runtime/process_runtime.h"
#include "services/cli/commands.h"

ABSL_FLAG(std::string, job, "", "Job spec file (text proto); empty = the built-in default job");
ABSL_FLAG(int, workers, 0, "Override the job's number of workers");
ABSL_FLAG(int, shards, 0, "Override the job's number of shards");
ABSL_FLAG(int, epochs, 0, "Override the job's epochs");
ABSL_FLAG(std::string, mode, "", "Override the aggregation mode: sync | gba | async | auto");
ABSL_FLAG(int, global_batch, 0, "Override the global batch G");
ABSL_FLAG(std::string, slowdowns, "",
          "Per-worker slowdown factors, e.g. 1,1,1,4 (worker 3 four times slower)");
ABSL_FLAG(std::string, slowdown_schedule, "",
          "Time-varying slowdown of one worker, INDEX@SCHEDULE, e.g. 3@0s:1,20s:4,60s:1 "
          "(worker 3 is 4x slower from 20 s to 60 s); repeat with ';' for more workers");
ABSL_FLAG(int64_t, train_limit, -1, "Use only the first N training examples (0 = all)");
ABSL_FLAG(int64_t, test_limit, -1, "Evaluate on the first N test examples (0 = all)");
ABSL_FLAG(bool, evaluator, true, "Run an evaluator");
ABSL_FLAG(int, logical_workers, 0,
          "local: how many of the job's workers each worker process stands for (it trains their "
          "shares of G as one batch); 0 = one process per core, or 1 with --slowdowns or "
          "--slowdown_schedule (docs/decisions/0023-logical-workers.md)");
ABSL_FLAG(bool, shared_memory, true,
          "local: shards and workers move dense payloads through shared memory (they share this "
          "host; docs/decisions/0022-co-located-data-plane.md); false: through the gRPC streams");
ABSL_FLAG(std::string, run_dir, "", "Where logs and reports go (default runs/<timestamp>)");
ABSL_FLAG(std::string, resume, "",
          "Start from the checkpoints of an earlier run directory (any number of shards)");
ABSL_FLAG(std::string, bin_dir, "", "Directory of the service binaries (default: next to this)");
ABSL_FLAG(int, timeout_seconds, 3600, "Give up (exit 1) if the job has not finished by then");
ABSL_FLAG(bool, prometheus, false,
          "Also run Debian's Prometheus (/usr/bin/prometheus) on a free loopback port, scraping "
          "every process of the run, until the run ends");
ABSL_FLAG(std::string, isa, "",
          "Kernel ISA level for every process: baseline | v3 | v4 (default: the best this CPU "
          "runs; sets SYNCOPATE_ISA for the children)");
ABSL_FLAG(bool, insecure_no_join_token, false,
          "local: do not generate a join token for the run (anyone who can reach the loopback "
          "ports, e.g. another user of this machine, could then join the job)");
ABSL_FLAG(std::string, coordinator, "127.0.0.1:7070", "status, release: the coordinator's address");
ABSL_FLAG(std::string, address, "127.0.0.1:7070", "health: the server to check (host:port)");
ABSL_FLAG(int, health_timeout_seconds, 3, "health: give up (exit 1) after this long");
ABSL_FLAG(int64_t, rows, 0, "datagen: number of examples to write (>= 1)");
ABSL_FLAG(std::string, out, "",
          "datagen: output file (gzip when it ends in .gz); export: the directory to create");
ABSL_FLAG(std::string, from, "",
          "export: a checkpoint directory (its newest complete set of shard checkpoints) or its "
          "kept/ directory (the version the job kept)");
ABSL_FLAG(std::string, module, "",
          "export: a PyTorch job's model file, when it is not at the path the job names");
ABSL_FLAG(std::string, into, "",
          "export: publish the export as the next version of this directory (<seq>-<source>-v"
          "<version>/ with a READY file) and point its `current` symlink at it");
ABSL_FLAG(int, keep, 3, "export --into: versions kept (the oldest beyond are removed)");
ABSL_FLAG(bool, torch_formats, true,
          "export: also write model.pt (and model.onnx for the built-in models) with PyTorch");
ABSL_FLAG(uint64_t, seed, 1,
          "datagen: sample seed (the rows and labels drawn); sim: the job's seed (initialisation, "
          "data order) and the step-time model's");
ABSL_FLAG(uint64_t, teacher_seed, 1,
          "datagen: teacher seed (the model behind the clicks; train and test files share it)");
ABSL_FLAG(int64_t, churn_period_rows, 0,
          "datagen: every this many rows, --churn_fraction of each field's values get new keys "
          "(a key space that grows without bound, like new ids in a live click log); 0 = off");
ABSL_FLAG(double, churn_fraction, 0.5, "datagen: the share of values --churn_period_rows renames");
ABSL_FLAG(std::string, teacher, "pairs",
          "datagen: the planted teacher, pairs (independent fields, four planted pairwise "
          "interactions) or segments (latent segments, FM interactions over 14 fields, "
          "informative missing numerics) or longtail (segments with vocabularies up to 2e5, "
          "flatter Zipf tails and a cold-start effect of rare values) or heavytail (longtail "
          "with zero-inflated counts, as a real click log's; libs/datagen/teacher_config.h)");

ABSL_FLAG(std::string, sim, "",
          "sim: the simulated cluster's timing, a syncopate.v1.SimSpec text proto (examples/sim/)");
ABSL_FLAG(
    std::string, policy, "",
    "sim: override the job's mode: sync | gba | async | auto, or async-scaled (async at lr * b/G, "
    "libs/sim/policy.h)");
ABSL_FLAG(double, target_accuracy, 0.85,
          "sim: report the virtual time of the first evaluation at or above this accuracy (jobs "
          "whose quality metric is accuracy: the MLP)");
ABSL_FLAG(double, target_auc, 0.77,
          "sim: report the virtual time of the first evaluation at or above this test AUC (jobs "
          "whose quality metric is AUC: the CTR models; --target_accuracy does not apply to them)");

int main(int argc, char** argv) {
  std::vector<char*> args = syncopate::runtime::InitProcess(
      argc, argv,
      "syncopate <command> [flags]\n"
      "  local   train a job on a local cluster of child processes (see flags below)\n"
      "  status  show a running cluster: --coordinator=HOST:PORT\n"
      "  release start a job its coordinator holds (--hold_start): --coordinator=HOST:PORT\n"
      "          --join_token_file=FILE\n"
      "  health  exit 0 if a server's gRPC health check is SERVING: --address=HOST:PORT\n"
      "  datagen ctr  write a synthetic Criteo-format click file: --rows=N --out=FILE[.gz]\n"
      "               [--seed=S] [--teacher_seed=T] [--teacher=pairs|segments|longtail|heavytail]\n"
      "               [--churn_period_rows=N [--churn_fraction=F]]\n"
      "  export  a job's checkpoints as files PyTorch, NumPy and ONNX read:\n"
      "          --from=CHECKPOINT_DIR[/kept] --out=NEW_DIR | --into=VERSIONS_DIR [--keep=3]\n"
      "          [--module=FILE] [--job=SPEC]\n"
      "  sim     simulate the job in virtual time with the real shard, model and mode policy:\n"
      "          --sim=SPEC [--job=JOB] [--seed=N] [--policy=sync|gba|async|auto]\n"
      "          [--target_accuracy=A (MLP) | --target_auc=A (CTR models)]\n"
      "Security (every binary): --tls_cert/--tls_key/--tls_ca turn on mTLS; --join_token_file\n"
      "(or --join_token) sets the shared join token; `local` generates one per run unless\n"
      "--insecure_no_join_token (see docs/operations.md).");
  const std::string command = args.size() > 1 ? args[1] : "";
  if (command == "local") return syncopate::cli::RunLocal();
  if (command == "status") return syncopate::cli::RunStatus();
  if (command == "release") return syncopate::cli::RunRelease();
  if (command == "health") return syncopate::cli::RunHealth();
  if (command == "datagen") return syncopate::cli::RunDatagen(args);
  if (command == "sim") return syncopate::cli::RunSim();
  if (command == "export") return syncopate::cli::RunExport();
  syncopate::runtime::Die(
      command.empty()
          ? "missing command: local, status, release, health, datagen, sim or export (see --help)"
          : "unknown command '" + command +
                "' (expected local, status, release, health, datagen, sim or export)");
}
