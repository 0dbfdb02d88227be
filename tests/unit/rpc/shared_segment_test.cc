#include "libs/rpc/shared_segment.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncopate::rpc {
namespace {

bool NameExists(const std::string& name) { return std::filesystem::exists("/dev/shm" + name); }

TEST(SharedSegment, TheOpenerSeesTheCreatorsBytesAndTheNameIsGoneOnceBothHoldIt) {
  absl::StatusOr<SharedSegment> created = SharedSegment::Create(4096);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE(NameExists(created->name()));
  struct stat st {};
  ASSERT_EQ(stat(("/dev/shm" + created->name()).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600) << "only the job's own user may map it";
  EXPECT_EQ(created->payload().size(), 4096u);
  std::memcpy(created->payload().data(), "gradient", 8);

  absl::StatusOr<SharedSegment> opened =
      SharedSegment::Open(created->name(), created->size(), created->nonce());
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_FALSE(NameExists(created->name())) << "the opener unlinks the name";
  EXPECT_EQ(std::string(opened->payload().data(), 8), "gradient");
  std::memcpy(opened->payload().data() + 100, "values", 6);
  EXPECT_EQ(std::string(created->payload().data() + 100, 6), "values");
}

TEST(SharedSegment, NamesAndNoncesAreNotGuessable) {
  absl::StatusOr<SharedSegment> a = SharedSegment::Create(64);
  absl::StatusOr<SharedSegment> b = SharedSegment::Create(64);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->name(), b->name());
  EXPECT_NE(a->nonce(), b->nonce());
  EXPECT_EQ(a->nonce().size(), SharedSegment::kNonceBytes);
  EXPECT_GE(a->name().size(), 32u) << "128 random bits in the name";
}

TEST(SharedSegment, AWrongNonceOrSizeIsRefusedAndNothingIsMapped) {
  absl::StatusOr<SharedSegment> created = SharedSegment::Create(128);
  ASSERT_TRUE(created.ok());
  std::string wrong = created->nonce();
  wrong[0] ^= 1;
  EXPECT_EQ(SharedSegment::Open(created->name(), created->size(), wrong).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(
      SharedSegment::Open(created->name(), created->size() + 64, created->nonce()).status().code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(NameExists(created->name())) << "a refused open leaves the offer alone";
  EXPECT_EQ(SharedSegment::Open("/syncopate-1-nothere", 128, created->nonce()).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(SharedSegment::Open("/etc/passwd", 128, created->nonce()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SharedSegment::Open("/other-name", 128, created->nonce()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SharedSegment, TheCreatorRemovesAnOfferNobodyTook) {
  std::string name;
  {
    absl::StatusOr<SharedSegment> created = SharedSegment::Create(64);
    ASSERT_TRUE(created.ok());
    name = created->name();
    EXPECT_TRUE(NameExists(name));
  }
  EXPECT_FALSE(NameExists(name));
}

// A process killed after Create leaves its name; RemoveStale (a shard's start) removes it, and
// leaves live processes' segments alone.
TEST(SharedSegment, RemoveStaleRemovesOnlyTheSegmentsOfDeadProcesses) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    absl::StatusOr<SharedSegment> created = SharedSegment::Create(64);
    const std::string name = created.ok() ? created->name() : "";
    (void)!write(pipe_fds[1], name.data(), name.size());
    _exit(0);  // no destructor: as a SIGKILL leaves it
  }
  char buffer[256] = {};
  const ssize_t n = read(pipe_fds[0], buffer, sizeof(buffer));
  waitpid(child, nullptr, 0);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  ASSERT_GT(n, 0);
  const std::string stale(buffer, static_cast<size_t>(n));
  ASSERT_TRUE(NameExists(stale));
  absl::StatusOr<SharedSegment> mine = SharedSegment::Create(64);
  ASSERT_TRUE(mine.ok());
  EXPECT_GE(SharedSegment::RemoveStale(), 1);
  EXPECT_FALSE(NameExists(stale));
  EXPECT_TRUE(NameExists(mine->name()));
}

TEST(SharedSegment, HostIdentityIsStableAndNamesTheIpcNamespace) {
  const std::string id = HostIdentity();
  EXPECT_THAT(id, ::testing::HasSubstr("/ipc:"));
  EXPECT_EQ(id, HostIdentity());
}

}  // namespace
}  // namespace syncopate::rpc
