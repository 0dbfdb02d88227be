// Linked into every integration test: on a fatal signal (SIGSEGV, SIGABRT, ...) the test prints
// a symbolized stack trace before it dies, so a crash that happens only on the CI machine says
// where it was. (security_test died with SIGSEGV in CI on 2026-11-24 and 2026-11-27, ~1 s into
// the run, and did not reproduce here; the trace of the second named TestBody, whose faulting
// instruction was the read of membership().worker_ids(0) from a status taken after the
// one-epoch job had already finished.)
#include "absl/debugging/failure_signal_handler.h"
#include "absl/debugging/symbolize.h"

namespace {

const bool kBacktraceOnCrash = [] {
  absl::InitializeSymbolizer("/proc/self/exe");
  absl::InstallFailureSignalHandler(absl::FailureSignalHandlerOptions());
  return true;
}();

}  // namespace
