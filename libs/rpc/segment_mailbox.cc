#include "libs/rpc/segment_mailbox.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace syncopate::rpc {
namespace {

// Offsets in the header: the futex word, then the message's length.
constexpr size_t kSequenceOffset = 0;
constexpr size_t kLengthOffset = 8;

// FUTEX_WAIT and FUTEX_WAKE without FUTEX_PRIVATE_FLAG: the word is in a mapping shared with
// another process.
void FutexWait(uint32_t* word, uint32_t expected, absl::Duration timeout) {
  const timespec ts = absl::ToTimespec(timeout);
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWake(uint32_t* word) {
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace

SegmentMailbox::SegmentMailbox(std::span<char> memory) {
  if (memory.size() <= kHeaderBytes || reinterpret_cast<uintptr_t>(memory.data()) % 8 != 0) return;
  header_ = memory.data();
  body_ = memory.data() + kHeaderBytes;
  capacity_ = memory.size() - kHeaderBytes;
}

uint32_t* SegmentMailbox::sequence_word() const {
  return reinterpret_cast<uint32_t*>(header_ + kSequenceOffset);
}

uint32_t SegmentMailbox::sequence() const {
  return std::atomic_ref<uint32_t>(*sequence_word()).load(std::memory_order_acquire);
}

absl::Status SegmentMailbox::Post(std::string_view message) {
  if (message.size() > capacity_) {
    return absl::InvalidArgumentError(absl::StrCat("a message of ", message.size(),
                                                   " bytes does not fit a mailbox of ", capacity_));
  }
  std::memcpy(body_, message.data(), message.size());
  std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(header_ + kLengthOffset))
      .store(message.size(), std::memory_order_relaxed);
  // Release: the body and the length are visible to whoever sees the new number.
  std::atomic_ref<uint32_t>(*sequence_word()).fetch_add(1, std::memory_order_release);
  FutexWake(sequence_word());
  return absl::OkStatus();
}

absl::Status SegmentMailbox::Take(uint32_t& seen, std::string& out, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  bool waited = false;
  for (;;) {
    const uint32_t now = sequence();
    if (now != seen) {
      seen = now;
      const uint64_t length =
          std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(header_ + kLengthOffset))
              .load(std::memory_order_relaxed);
      if (length > capacity_) {
        return absl::DataLossError(absl::StrCat("a mailbox message says it is ", length,
                                                " bytes; the mailbox holds ", capacity_));
      }
      out.assign(body_, length);
      return absl::OkStatus();
    }
    // One wait: a wake-up without a new message (Wake, a spurious one) returns to the caller,
    // which looks at its stop flags and calls again.
    const absl::Duration left = deadline - absl::Now();
    if (waited || left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError("no mailbox message");
    }
    FutexWait(sequence_word(), seen, left);
    waited = true;
  }
}

void SegmentMailbox::Wake() { FutexWake(sequence_word()); }

}  // namespace syncopate::rpc
