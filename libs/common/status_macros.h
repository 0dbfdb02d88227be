// Status propagation macros. Debian's Abseil (20220623) ships none, so these two live here,
// once, instead of if-return blocks repeated everywhere.
// Thread-safety: macros only; no state.
#ifndef SYNCOPATE_LIBS_COMMON_STATUS_MACROS_H_
#define SYNCOPATE_LIBS_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SYNCOPATE_STATUS_CONCAT_INNER_(a, b) a##b
#define SYNCOPATE_STATUS_CONCAT_(a, b) SYNCOPATE_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the enclosing function if not OK.
#define SYNCOPATE_RETURN_IF_ERROR(expr)                    \
  do {                                                     \
    ::absl::Status syncopate_status_ = (expr);             \
    if (!syncopate_status_.ok()) return syncopate_status_; \
  } while (0)

// `lhs` = value of `rexpr` (an absl::StatusOr<T>), or returns its status from the enclosing
// function. `lhs` may be a declaration: SYNCOPATE_ASSIGN_OR_RETURN(auto x, MakeX());
#define SYNCOPATE_ASSIGN_OR_RETURN(lhs, rexpr) \
  SYNCOPATE_ASSIGN_OR_RETURN_IMPL_(SYNCOPATE_STATUS_CONCAT_(syncopate_or_, __LINE__), lhs, rexpr)
// `tmp` is a name being declared and `lhs` may be a declaration: neither can be parenthesized
// (hence the NOLINTs for bugprone-macro-parentheses).
#define SYNCOPATE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr)                      \
  auto tmp = (rexpr);                 /* NOLINT(bugprone-macro-parentheses) */ \
  if (!tmp.ok()) return tmp.status(); /* NOLINT(bugprone-macro-parentheses) */ \
  lhs = std::move(tmp).value()        /* NOLINT(bugprone-macro-parentheses) */

#endif  // SYNCOPATE_LIBS_COMMON_STATUS_MACROS_H_
