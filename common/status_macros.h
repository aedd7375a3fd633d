#pragma once
// Propagation helpers for absl::Status / absl::StatusOr across module boundaries.

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define HPO_CONCAT_INNER_(a, b) a##b
#define HPO_CONCAT_(a, b) HPO_CONCAT_INNER_(a, b)

// Returns from the current function if `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    ::absl::Status hpo_status_ = (expr);       \
    if (!hpo_status_.ok()) return hpo_status_; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, F())`: x = *F(), or returns F()'s status.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(HPO_CONCAT_(hpo_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(*tmp)
