#include "libs/launch/process_group.h"

#include <fcntl.h>
#include <signal.h>  // NOLINT(modernize-deprecated-headers): kill, sigset_t are POSIX
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "libs/runtime/process_runtime.h"

extern char** environ;

namespace syncopate::launch {

std::string Exit::Describe() const {
  const std::string why = reason.empty() ? "" : absl::StrCat(": ", reason);
  if (WIFEXITED(status)) return absl::StrCat(name, " exited with code ", WEXITSTATUS(status), why);
  if (WIFSIGNALED(status)) {
    return absl::StrCat(name, " killed by ", strsignal(WTERMSIG(status)), why);
  }
  return absl::StrCat(name, " ended (status ", status, ")", why);
}

void ResourceUse::Add(const ResourceUse& other) {
  cpu_seconds += other.cpu_seconds;
  voluntary_switches += other.voluntary_switches;
  involuntary_switches += other.involuntary_switches;
  processes += other.processes;
}

std::string ChildClass(const std::string& name) {
  const size_t dash = name.find_last_of('-');
  if (dash == std::string::npos || dash + 1 == name.size()) return name;
  for (size_t i = dash + 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return name;
  }
  return name.substr(0, dash);
}

std::string DescribeUsage(const std::map<std::string, ResourceUse>& by_class, int64_t examples) {
  std::string out = "cpu:";
  ResourceUse total;
  for (const auto& [name, use] : by_class) {
    absl::StrAppend(&out, total.processes == 0 ? " " : ", ", name, " ",
                    absl::StrFormat("%.1f", use.cpu_seconds), " s");
    if (use.processes > 1) absl::StrAppend(&out, " (", use.processes, " processes)");
    total.Add(use);
  }
  absl::StrAppend(&out, "; ", absl::StrFormat("%.1f", total.cpu_seconds), " CPU-s");
  if (examples > 0) {
    absl::StrAppend(
        &out, ", ",
        absl::StrFormat("%.1f", 1e6 * total.cpu_seconds / static_cast<double>(examples)),
        " us/example");
  }
  absl::StrAppend(&out, "; context switches ", total.voluntary_switches, " voluntary, ",
                  total.involuntary_switches, " involuntary");
  return out;
}

std::optional<Exit> ProcessGroup::Wait(const std::string& name, pid_t pid, bool block) {
  int status = 0;
  struct rusage usage {};
  if (wait4(pid, &status, block ? 0 : WNOHANG, &usage) != pid) return std::nullopt;
  return Exited(name, status, usage);
}

Exit ProcessGroup::Exited(const std::string& name, int status, const struct rusage& usage) {
  Exit exit{name, status, ""};
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
  };
  exit.usage = {.cpu_seconds = seconds(usage.ru_utime) + seconds(usage.ru_stime),
                .voluntary_switches = usage.ru_nvcsw,
                .involuntary_switches = usage.ru_nivcsw,
                .processes = 1};
  usage_by_class_[ChildClass(name)].Add(exit.usage);
  auto it = termination_logs_.find(name);
  if (it == termination_logs_.end() || (WIFEXITED(status) && WEXITSTATUS(status) == 0)) return exit;
  std::ifstream in(it->second);
  std::getline(in, exit.reason);
  return exit;
}

absl::StatusOr<pid_t> ProcessGroup::Spawn(const ChildSpec& spec) {
  if (children_.contains(spec.name)) {
    return absl::AlreadyExistsError(absl::StrCat(spec.name, " is already running"));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, spec.log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  // The launcher blocks SIGTERM/SIGINT for its signal thread; children must get the default.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> argv;
  for (const std::string& arg : spec.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  // The environment, with the child's own termination log (never a stale line of a run before).
  std::vector<char*> env;
  const std::string termination =
      absl::StrCat(runtime::kTerminationLogEnv, "=", spec.termination_log);
  for (char** e = environ; *e != nullptr; ++e) {
    if (!absl::StartsWith(*e, absl::StrCat(runtime::kTerminationLogEnv, "="))) env.push_back(*e);
  }
  if (!spec.termination_log.empty()) {
    std::remove(spec.termination_log.c_str());
    env.push_back(const_cast<char*>(termination.c_str()));
    termination_logs_[spec.name] = spec.termination_log;
  }
  env.push_back(nullptr);
  pid_t pid = 0;
  const int error = posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (error != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot start ", spec.name, " (", spec.argv[0], "): ", strerror(error)));
  }
  children_[spec.name] = pid;
  return pid;
}

std::vector<Exit> ProcessGroup::Reap() {
  std::vector<Exit> exits;
  for (auto it = children_.begin(); it != children_.end();) {
    if (std::optional<Exit> exit = Wait(it->first, it->second, /*block=*/false)) {
      exits.push_back(*std::move(exit));
      it = children_.erase(it);
    } else {
      ++it;
    }
  }
  return exits;
}

pid_t ProcessGroup::Pid(const std::string& name) const {
  auto it = children_.find(name);
  return it == children_.end() ? -1 : it->second;
}

void ProcessGroup::Signal(const std::string& name, int signal) {
  auto it = children_.find(name);
  if (it != children_.end()) kill(it->second, signal);
}

std::vector<Exit> ProcessGroup::TerminateAll(absl::Duration grace) {
  std::vector<Exit> exits;
  for (const auto& [name, pid] : children_) kill(pid, SIGTERM);
  const absl::Time deadline = absl::Now() + grace;
  while (!children_.empty() && absl::Now() < deadline) {
    for (Exit& e : Reap()) exits.push_back(std::move(e));
    if (!children_.empty()) absl::SleepFor(absl::Milliseconds(20));
  }
  for (const auto& [name, pid] : children_) {
    kill(pid, SIGKILL);
    if (std::optional<Exit> exit = Wait(name, pid, /*block=*/true)) {
      exits.push_back(*std::move(exit));
    }
  }
  children_.clear();
  return exits;
}

absl::StatusOr<std::map<std::string, std::string>> ProcessGroup::WaitForReadyFile(
    const std::string& name, const std::string& path, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    absl::StatusOr<std::map<std::string, std::string>> values = runtime::ReadKeyValueFile(path);
    if (values.ok()) return values;
    auto it = children_.find(name);
    if (it == children_.end()) return absl::UnavailableError(absl::StrCat(name, " is not running"));
    if (std::optional<Exit> exit = Wait(name, it->second, /*block=*/false)) {
      children_.erase(it);
      return absl::UnavailableError(exit->Describe());
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(
      absl::StrCat(name, " did not become ready within ", absl::FormatDuration(timeout)));
}

}  // namespace syncopate::launch
