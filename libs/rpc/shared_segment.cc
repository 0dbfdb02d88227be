#include "libs/rpc/shared_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace syncopate::rpc {
namespace {

constexpr char kMagic[8] = {'S', 'Y', 'N', 'C', 'S', 'H', 'M', '1'};
constexpr char kPrefix[] = "syncopate-";

absl::Status Errno(absl::string_view what, const std::string& name) {
  return absl::InternalError(absl::StrCat(what, " ", name, ": ", std::strerror(errno)));
}

absl::StatusOr<std::string> RandomBytes(size_t n) {
  std::string bytes(n, '\0');
  size_t got = 0;
  while (got < n) {
    const ssize_t r = getrandom(bytes.data() + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return absl::InternalError(absl::StrCat("getrandom: ", std::strerror(errno)));
    got += static_cast<size_t>(r);
  }
  return bytes;
}

}  // namespace

std::string HostIdentity() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  if (!std::getline(boot, boot_id) || boot_id.empty()) return "";
  struct stat ns {};
  if (stat("/proc/self/ns/ipc", &ns) != 0) return "";
  return absl::StrCat(boot_id, "/ipc:", ns.st_ino);
}

absl::StatusOr<SharedSegment> SharedSegment::Create(size_t payload_bytes) {
  absl::StatusOr<std::string> random = RandomBytes(16 + kNonceBytes);
  if (!random.ok()) return random.status();
  const std::string name =
      absl::StrCat("/", kPrefix, getpid(), "-", absl::BytesToHexString(random->substr(0, 16)));
  std::string nonce = random->substr(16);
  const size_t size = kHeaderBytes + payload_bytes;
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("shm_open", name);
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    absl::Status status = Errno("ftruncate", name);
    close(fd);
    shm_unlink(name.c_str());
    return status;
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    absl::Status status = Errno("mmap", name);
    shm_unlink(name.c_str());
    return status;
  }
  char* header = static_cast<char*>(base);
  std::memcpy(header, kMagic, sizeof(kMagic));
  std::memcpy(header + sizeof(kMagic), nonce.data(), kNonceBytes);
  const uint64_t payload = payload_bytes;
  std::memcpy(header + sizeof(kMagic) + kNonceBytes, &payload, sizeof(payload));
  return SharedSegment(name, std::move(nonce), header, size, /*linked=*/true);
}

absl::StatusOr<SharedSegment> SharedSegment::Open(const std::string& name, size_t size,
                                                  std::string_view nonce) {
  if (!absl::StartsWith(name, absl::StrCat("/", kPrefix)) || name.find('/', 1) != name.npos) {
    return absl::InvalidArgumentError(absl::StrCat("not a segment name: ", name));
  }
  if (nonce.size() != kNonceBytes || size < kHeaderBytes) {
    return absl::InvalidArgumentError("a segment offer needs a 16-byte nonce and a header");
  }
  const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("shm_open ", name, ": ", std::strerror(errno)));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != size) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(name, " is ", st.st_size, " bytes, the offer said ", size));
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) return Errno("mmap", name);
  const char* header = static_cast<const char*>(base);
  if (std::memcmp(header, kMagic, sizeof(kMagic)) != 0 ||
      std::memcmp(header + sizeof(kMagic), nonce.data(), kNonceBytes) != 0) {
    munmap(base, size);
    return absl::FailedPreconditionError(
        absl::StrCat(name, " does not carry the offered nonce: another segment of that name"));
  }
  SharedSegment segment(name, std::string(nonce), static_cast<char*>(base), size,
                        /*linked=*/true);
  segment.Unlink();  // both sides hold it now: nothing is left behind if either dies
  return segment;
}

int SharedSegment::RemoveStale() {
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return 0;
  int removed = 0;
  while (const dirent* entry = readdir(dir)) {
    absl::string_view rest = entry->d_name;
    if (!absl::ConsumePrefix(&rest, kPrefix)) continue;
    const std::vector<absl::string_view> parts = absl::StrSplit(rest, absl::MaxSplits('-', 1));
    int pid = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &pid) || pid <= 0) continue;
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
    if (shm_unlink(absl::StrCat("/", entry->d_name).c_str()) == 0) ++removed;
  }
  closedir(dir);
  return removed;
}

SharedSegment::SharedSegment(SharedSegment&& other) noexcept { *this = std::move(other); }

SharedSegment& SharedSegment::operator=(SharedSegment&& other) noexcept {
  if (this != &other) {
    Release();
    name_ = std::move(other.name_);
    nonce_ = std::move(other.nonce_);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
    linked_ = std::exchange(other.linked_, false);
  }
  return *this;
}

SharedSegment::~SharedSegment() { Release(); }

void SharedSegment::Release() {
  Unlink();
  if (base_ != nullptr) munmap(base_, size_);
  base_ = nullptr;
  size_ = 0;
}

std::span<char> SharedSegment::payload() const {
  if (base_ == nullptr) return {};
  return {base_ + kHeaderBytes, size_ - kHeaderBytes};
}

void SharedSegment::Unlink() {
  if (!linked_) return;
  linked_ = false;
  shm_unlink(name_.c_str());  // ENOENT: the peer unlinked it first
}

}  // namespace syncopate::rpc
