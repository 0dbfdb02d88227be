// Linked into every integration test: on a fatal signal (SIGSEGV, SIGABRT, ...) the test prints
// a symbolized stack trace before it dies, so a crash that happens only on the CI machine says
// where it was. (security_test died with SIGSEGV once in CI, 2026-11-24, 1 s into the run, and
// did not reproduce in 16 runs here, several of them concurrent.)
#include "absl/debugging/failure_signal_handler.h"
#include "absl/debugging/symbolize.h"

namespace {

const bool kBacktraceOnCrash = [] {
  absl::InitializeSymbolizer("/proc/self/exe");
  absl::InstallFailureSignalHandler(absl::FailureSignalHandlerOptions());
  return true;
}();

}  // namespace
