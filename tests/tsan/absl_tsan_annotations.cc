// Makes Debian's prebuilt Abseil synchronisation visible to ThreadSanitizer (SANITIZE=thread
// builds only; see cmake/syncopate.cmake).
//
// Debian's libabsl_synchronization is not built with TSan, so TSan cannot see that absl::Mutex
// and absl::Notification order memory: every access guarded by an absl::Mutex is then reported as
// a race *in our own frames*, which no suppression limited to Abseil's frames can hide (measured:
// two threads incrementing a counter under absl::MutexLock are reported). This file interposes the
// exported entry points of Debian's Abseil (the symbols below; `debian3` is Debian's inline
// namespace), calls the real function found with dlsym(RTLD_NEXT), and tells TSan about the
// happens-before edge it creates: release before giving a mutex up, acquire after taking it.
// TSan then checks our data for races exactly as with an instrumented Abseil (it does not learn
// lock ownership, so it reports no lock-order inversions on these mutexes).
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

// absl::Duration and absl::Time: 16 trivially copyable bytes, passed in two registers.
struct Duration {
  int64_t hi;
  uint32_t lo;
};
struct Time {
  Duration rep;
};

template <typename F>
F Real(const char* symbol) {
  void* real = dlsym(RTLD_NEXT, symbol);
  if (real == nullptr) {
    fprintf(stderr, "tsan annotations: %s not found in Debian's Abseil\n", symbol);
    abort();
  }
  return reinterpret_cast<F>(real);
}

// The address of absl::Notification::notified_yet_ (after its 8-byte Mutex): HasBeenNotified()
// is inline in our code and acquire-loads it, so Notify must release on it too.
void* NotifiedFlag(void* notification) { return static_cast<char*>(notification) + 8; }

}  // namespace

#define SYNCOPATE_REAL(type, symbol) static const auto real = Real<type>(symbol)

extern "C" {

// --- absl::Mutex ---------------------------------------------------------------------------
void _ZN4absl7debian35Mutex4LockEv(void* mu) {
  SYNCOPATE_REAL(void (*)(void*), "_ZN4absl7debian35Mutex4LockEv");
  real(mu);
  __tsan_acquire(mu);
}
void _ZN4absl7debian35Mutex10ReaderLockEv(void* mu) {
  SYNCOPATE_REAL(void (*)(void*), "_ZN4absl7debian35Mutex10ReaderLockEv");
  real(mu);
  __tsan_acquire(mu);
}
bool _ZN4absl7debian35Mutex7TryLockEv(void* mu) {
  SYNCOPATE_REAL(bool (*)(void*), "_ZN4absl7debian35Mutex7TryLockEv");
  const bool locked = real(mu);
  if (locked) __tsan_acquire(mu);
  return locked;
}
bool _ZN4absl7debian35Mutex13ReaderTryLockEv(void* mu) {
  SYNCOPATE_REAL(bool (*)(void*), "_ZN4absl7debian35Mutex13ReaderTryLockEv");
  const bool locked = real(mu);
  if (locked) __tsan_acquire(mu);
  return locked;
}
void _ZN4absl7debian35Mutex6UnlockEv(void* mu) {
  SYNCOPATE_REAL(void (*)(void*), "_ZN4absl7debian35Mutex6UnlockEv");
  __tsan_release(mu);
  real(mu);
}
void _ZN4absl7debian35Mutex12ReaderUnlockEv(void* mu) {
  SYNCOPATE_REAL(void (*)(void*), "_ZN4absl7debian35Mutex12ReaderUnlockEv");
  __tsan_release(mu);
  real(mu);
}
void _ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE(void* mu, const void* cond) {
  SYNCOPATE_REAL(void (*)(void*, const void*), "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  real(mu, cond);
  __tsan_acquire(mu);
}
bool _ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE(void* mu,
                                                                                 const void* cond,
                                                                                 Duration d) {
  SYNCOPATE_REAL(bool (*)(void*, const void*, Duration),
                 "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const bool met = real(mu, cond, d);
  __tsan_acquire(mu);  // held on return either way
  return met;
}
// Await* give the mutex up while waiting and take it back before returning.
void _ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE(void* mu, const void* cond) {
  SYNCOPATE_REAL(void (*)(void*, const void*), "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  __tsan_release(mu);
  real(mu, cond);
  __tsan_acquire(mu);
}
bool _ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE(void* mu,
                                                                              const void* cond,
                                                                              Duration d) {
  SYNCOPATE_REAL(bool (*)(void*, const void*, Duration),
                 "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_release(mu);
  const bool met = real(mu, cond, d);
  __tsan_acquire(mu);
  return met;
}
bool _ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE(void* mu,
                                                                           const void* cond,
                                                                           Time t) {
  SYNCOPATE_REAL(bool (*)(void*, const void*, Time),
                 "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_release(mu);
  const bool met = real(mu, cond, t);
  __tsan_acquire(mu);
  return met;
}

// --- absl::Notification --------------------------------------------------------------------
void _ZN4absl7debian312Notification6NotifyEv(void* n) {
  SYNCOPATE_REAL(void (*)(void*), "_ZN4absl7debian312Notification6NotifyEv");
  __tsan_release(n);
  __tsan_release(NotifiedFlag(n));
  real(n);
}
void _ZNK4absl7debian312Notification19WaitForNotificationEv(void* n) {
  SYNCOPATE_REAL(void (*)(void*), "_ZNK4absl7debian312Notification19WaitForNotificationEv");
  real(n);
  __tsan_acquire(n);
}
bool _ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE(void* n,
                                                                                    Duration d) {
  SYNCOPATE_REAL(bool (*)(void*, Duration),
                 "_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  const bool notified = real(n, d);
  if (notified) __tsan_acquire(n);
  return notified;
}

}  // extern "C"
