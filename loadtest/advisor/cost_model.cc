#include "loadtest/advisor/cost_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace sluice::advisor {

double CostModel::BatchSeconds(int batch_size, int64_t length) const {
  const double bl = static_cast<double>(batch_size) * static_cast<double>(length);
  return a + b * bl + c * bl * static_cast<double>(length);
}

double CostModel::RequestSeconds(int batch_size, int64_t length) const {
  return BatchSeconds(batch_size, length) / static_cast<double>(batch_size);
}

std::string CostModel::ToString() const {
  const auto term = [](double v) { return absl::StrFormat(" %c %.4g", v < 0 ? '-' : '+', std::abs(v)); };
  return absl::StrFormat("time = %.4g%s*B*L%s*B*L^2 s", a, term(b), term(c));
}

absl::StatusOr<CostModel> ParseCostModel(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, ',');
  if (parts.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "': expected three numbers a,b,c"));
  }
  std::array<double, 3> v{};
  for (size_t i = 0; i < 3; ++i) {
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(parts[i]), &v[i]) || !std::isfinite(v[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", parts[i], "' (", std::string(1, "abc"[i]), ") is not a number"));
    }
  }
  return CostModel{v[0], v[1], v[2]};
}

namespace {

constexpr char kNotPinnedDown[] = "the timings do not pin down a, b and c (measure at least 3 distinct lengths)";

// Least squares of y over the columns of x named in `use` (Householder QR); nullopt when those columns are rank
// deficient. Unused coefficients are 0.
std::optional<std::array<double, 3>> SolveOnColumns(std::vector<std::array<double, 3>> x, std::vector<double> y,
                                                    const std::vector<int>& use) {
  const size_t n = x.size();
  const size_t m = use.size();
  std::vector<double> r_diag(m);
  for (size_t k = 0; k < m; ++k) {
    const int col = use[k];
    double norm = 0;
    for (size_t i = k; i < n; ++i) norm += x[i][col] * x[i][col];
    norm = std::sqrt(norm);
    if (norm < 1e-12) return std::nullopt;
    const double alpha = x[k][col] > 0 ? -norm : norm;
    std::vector<double> v(n, 0.0);
    for (size_t i = k; i < n; ++i) v[i] = x[i][col];
    v[k] -= alpha;
    double vnorm2 = 0;
    for (size_t i = k; i < n; ++i) vnorm2 += v[i] * v[i];
    if (vnorm2 == 0) return std::nullopt;
    for (size_t j = k; j < m; ++j) {
      double dot = 0;
      for (size_t i = k; i < n; ++i) dot += v[i] * x[i][use[j]];
      for (size_t i = k; i < n; ++i) x[i][use[j]] -= 2 * dot / vnorm2 * v[i];
    }
    double dot = 0;
    for (size_t i = k; i < n; ++i) dot += v[i] * y[i];
    for (size_t i = k; i < n; ++i) y[i] -= 2 * dot / vnorm2 * v[i];
    r_diag[k] = x[k][col];
  }
  double largest = 0;
  for (double d : r_diag) largest = std::max(largest, std::abs(d));
  for (double d : r_diag) {
    if (std::abs(d) < 1e-10 * largest) return std::nullopt;
  }
  std::array<double, 3> coef{0, 0, 0};
  for (size_t k = m; k-- > 0;) {
    double s = y[k];
    for (size_t j = k + 1; j < m; ++j) s -= x[k][use[j]] * coef[use[j]];
    coef[use[k]] = s / x[k][use[k]];
  }
  return coef;
}

}  // namespace

absl::StatusOr<CostModel> FitCostModel(const std::vector<TimingPoint>& points) {
  const size_t n = points.size();
  if (n < 3) return absl::InvalidArgumentError(absl::StrCat("fitting a, b, c needs at least 3 timings, got ", n));
  // Design matrix columns 1, B·L, B·L², each scaled by its largest magnitude; y = seconds.
  std::vector<std::array<double, 3>> x(n);
  std::vector<double> y(n);
  std::array<double, 3> scale{0, 0, 0};
  for (size_t i = 0; i < n; ++i) {
    const TimingPoint& p = points[i];
    if (p.batch_size < 1 || p.length < 1 || !std::isfinite(p.seconds) || p.seconds <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("timing ", i, ": needs batch >= 1, length >= 1, seconds > 0"));
    }
    const double bl = static_cast<double>(p.batch_size) * static_cast<double>(p.length);
    x[i] = {1.0, bl, bl * static_cast<double>(p.length)};
    y[i] = p.seconds;
    for (int j = 0; j < 3; ++j) scale[j] = std::max(scale[j], std::abs(x[i][j]));
  }
  for (auto& row : x) {
    for (int j = 0; j < 3; ++j) row[j] /= scale[j];
  }
  if (!SolveOnColumns(x, y, {0, 1, 2})) return absl::InvalidArgumentError(kNotPinnedDown);
  // Non-negative least squares, exactly: the constrained optimum is the unconstrained least-squares solution on its
  // own support (the terms it keeps), so of the solutions on each of the 7 non-empty subsets of {a, b, c} whose
  // coefficients are all >= 0, the one with the least squared error is the optimum. A negative term (e.g. an
  // intercept below 0 on timings of a few long graphs) would make short buckets cost less than nothing.
  std::optional<std::array<double, 3>> best;
  double best_error = 0;
  for (int mask = 1; mask < 8; ++mask) {
    std::vector<int> use;
    for (int j = 0; j < 3; ++j) {
      if (mask & (1 << j)) use.push_back(j);
    }
    const std::optional<std::array<double, 3>> coef = SolveOnColumns(x, y, use);
    if (!coef || (*coef)[0] < 0 || (*coef)[1] < 0 || (*coef)[2] < 0) continue;
    double error = 0;
    for (size_t i = 0; i < n; ++i) {
      const double r = y[i] - ((*coef)[0] * x[i][0] + (*coef)[1] * x[i][1] + (*coef)[2] * x[i][2]);
      error += r * r;
    }
    if (!best || error < best_error) {
      best = coef;
      best_error = error;
    }
  }
  // Every column is non-negative and the seconds positive, so a one-term fit is always feasible.
  if (!best) return absl::InternalError("no non-negative fit of a, b, c (unreachable for positive timings)");
  return CostModel{(*best)[0] / scale[0], (*best)[1] / scale[1], (*best)[2] / scale[2]};
}

bool NondecreasingUpTo(const CostModel& model, int batch_size, int64_t max_length) {
  // d time / dL = B·(b + 2·c·L) is linear in L: check both ends.
  const auto slope = [&](double l) { return model.b + 2 * model.c * l; };
  return model.BatchSeconds(batch_size, 1) > 0 && slope(1) >= 0 && slope(static_cast<double>(max_length)) >= 0;
}

}  // namespace sluice::advisor
