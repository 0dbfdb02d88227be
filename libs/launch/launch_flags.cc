#include "libs/launch/launch_flags.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "libs/worker/slowdown_schedule.h"

namespace syncopate::launch {

absl::StatusOr<std::vector<double>> ParseSlowdowns(absl::string_view text, int workers) {
  std::vector<double> slowdowns;
  if (text.empty()) return slowdowns;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    double f = 0;
    if (!absl::SimpleAtod(part, &f) || !(f >= 1.0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--slowdowns: '", part, "' is not a factor >= 1"));
    }
    slowdowns.push_back(f);
  }
  if (static_cast<int>(slowdowns.size()) > workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("--slowdowns lists ", slowdowns.size(), " factors for ", workers, " workers"));
  }
  return slowdowns;
}

absl::StatusOr<std::map<int, std::string>> ParseSlowdownSchedules(absl::string_view text,
                                                                  int workers) {
  std::map<int, std::string> schedules;
  if (text.empty()) return schedules;
  for (absl::string_view entry : absl::StrSplit(text, ';')) {
    std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(entry, '@');
    int index = -1;
    if (!absl::SimpleAtoi(parts.first, &index) || index < 0 || index >= workers) {
      return absl::InvalidArgumentError(absl::StrCat("--slowdown_schedule: '", entry,
                                                     "' must be INDEX@SCHEDULE with INDEX in [0, ",
                                                     workers, ")"));
    }
    absl::StatusOr<worker::SlowdownSchedule> parsed = worker::SlowdownSchedule::Parse(parts.second);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--slowdown_schedule: ", parsed.status().message()));
    }
    schedules[index] = std::string(parts.second);
  }
  return schedules;
}

absl::StatusOr<int> ChooseLogicalWorkers(int requested, int workers, int cores,
                                         bool per_worker_slowdowns) {
  if (requested < 0) return absl::InvalidArgumentError("--logical_workers must be >= 0 (0: auto)");
  if (requested > 0) {
    if (workers % requested != 0) {
      return absl::InvalidArgumentError(absl::StrCat("--logical_workers=", requested,
                                                     " does not divide the job's ", workers,
                                                     " workers into processes"));
    }
    if (requested > 1 && per_worker_slowdowns) {
      return absl::InvalidArgumentError(
          "--slowdowns and --slowdown_schedule slow single workers: use them with "
          "--logical_workers=1");
    }
    return requested;
  }
  if (per_worker_slowdowns || workers <= 1) return 1;
  if (cores <= 1) return workers;
  int processes = 1;
  for (int p = std::min(workers, cores); p >= 1; --p) {
    if (workers % p == 0) {
      processes = p;
      break;
    }
  }
  return processes == 1 ? 1 : workers / processes;
}

absl::StatusOr<int> FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::UnavailableError("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  close(fd);
  if (!ok) return absl::UnavailableError("no free loopback port");
  return ntohs(addr.sin_port);
}

}  // namespace syncopate::launch
