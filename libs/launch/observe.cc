#include "libs/launch/observe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace syncopate::launch {

absl::StatusOr<std::string> HttpRequest(int port, const std::string& request,
                                        absl::Duration timeout) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("socket(): ", strerror(errno)));
  // On Linux SO_SNDTIMEO also bounds connect(); SO_RCVTIMEO bounds each read.
  const timeval tv = absl::ToTimeval(timeout);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int error = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect to port ", port, ": ", strerror(error)));
  }
  const std::string text = request + " HTTP/1.0\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n";
  std::string reply;
  const absl::Time deadline = absl::Now() + timeout;
  bool complete = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (complete) {
    char buffer[65536];
    ssize_t n;
    // A server that trickles bytes still cannot keep us past the deadline.
    while ((n = read(fd, buffer, sizeof(buffer))) > 0 && absl::Now() < deadline) {
      reply.append(buffer, n);
    }
    complete = n == 0;
  }
  close(fd);
  if (!complete) {
    return absl::DeadlineExceededError(absl::StrCat("no complete reply from port ", port,
                                                    " within ", absl::FormatDuration(timeout)));
  }
  return reply;
}

std::optional<double> MetricValue(const std::string& text, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::ConsumePrefix(&line, series) && absl::ConsumePrefix(&line, " ")) {
      return std::atof(std::string(line).c_str());
    }
  }
  return std::nullopt;
}

absl::StatusOr<int64_t> ResidentBytes(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  if (!in) return absl::NotFoundError(absl::StrCat("no process ", pid));
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "VmRSS:")) continue;
    rest = absl::StripAsciiWhitespace(rest);
    int64_t kib = 0;
    if (absl::ConsumeSuffix(&rest, " kB") && absl::SimpleAtoi(rest, &kib)) return kib * 1024;
    return absl::InternalError(absl::StrCat("cannot parse '", line, "'"));
  }
  // A zombie has no VmRSS line: it is gone as far as memory goes.
  return absl::NotFoundError(absl::StrCat("process ", pid, " has no VmRSS"));
}

}  // namespace syncopate::launch
