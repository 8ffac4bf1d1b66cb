// Early-return helpers for absl::Status / absl::StatusOr (absl 2022 ships none publicly).
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SLUICE_CONCAT_INNER(a, b) a##b
#define SLUICE_CONCAT(a, b) SLUICE_CONCAT_INNER(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define SLUICE_RETURN_IF_ERROR(expr)               \
  do {                                             \
    if (absl::Status _st = (expr); !_st.ok()) {    \
      return _st;                                  \
    }                                              \
  } while (0)

// `lhs = value of expr` when OK, otherwise returns its status. lhs may declare a variable.
#define SLUICE_ASSIGN_OR_RETURN(lhs, expr) \
  SLUICE_ASSIGN_OR_RETURN_IMPL(SLUICE_CONCAT(_statusor_, __LINE__), lhs, expr)
#define SLUICE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
