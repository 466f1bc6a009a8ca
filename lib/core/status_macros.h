// Small helpers for absl::Status plumbing. lib/ never throws: every fallible call returns
// absl::Status or absl::StatusOr<T>, and these macros keep the early returns short.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TFD_CONCAT_INNER_(a, b) a##b
#define TFD_CONCAT_(a, b) TFD_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define TFD_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::absl::Status tfd_status_ = (expr);       \
    if (!tfd_status_.ok()) return tfd_status_; \
  } while (0)

// `TFD_ASSIGN_OR_RETURN(auto x, Foo());` assigns the value of an absl::StatusOr or returns its
// error from the enclosing function.
#define TFD_ASSIGN_OR_RETURN(lhs, expr) TFD_ASSIGN_OR_RETURN_IMPL_(TFD_CONCAT_(tfd_statusor_, __LINE__), lhs, expr)
#define TFD_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return std::move(tmp).status();   \
  lhs = std::move(tmp).value()
