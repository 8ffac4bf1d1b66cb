#include "loadtest/advisor/cost_model.h"

#include <algorithm>
#include <array>
#include <cmath>

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
  // Householder QR, applied to y as we go.
  std::array<double, 3> r_diag{};
  for (int k = 0; k < 3; ++k) {
    double norm = 0;
    for (size_t i = k; i < n; ++i) norm += x[i][k] * x[i][k];
    norm = std::sqrt(norm);
    if (norm < 1e-12) {
      return absl::InvalidArgumentError(
          "the timings do not pin down a, b and c (measure at least 3 distinct lengths)");
    }
    const double alpha = x[k][k] > 0 ? -norm : norm;
    std::vector<double> v(n, 0.0);
    for (size_t i = k; i < n; ++i) v[i] = x[i][k];
    v[k] -= alpha;
    double vnorm2 = 0;
    for (size_t i = k; i < n; ++i) vnorm2 += v[i] * v[i];
    for (int j = k; j < 3; ++j) {
      double dot = 0;
      for (size_t i = k; i < n; ++i) dot += v[i] * x[i][j];
      for (size_t i = k; i < n; ++i) x[i][j] -= 2 * dot / vnorm2 * v[i];
    }
    double dot = 0;
    for (size_t i = k; i < n; ++i) dot += v[i] * y[i];
    for (size_t i = k; i < n; ++i) y[i] -= 2 * dot / vnorm2 * v[i];
    r_diag[k] = x[k][k];
  }
  const double largest = std::max({std::abs(r_diag[0]), std::abs(r_diag[1]), std::abs(r_diag[2])});
  for (int k = 0; k < 3; ++k) {
    if (std::abs(r_diag[k]) < 1e-10 * largest) {
      return absl::InvalidArgumentError(
          "the timings do not pin down a, b and c (measure at least 3 distinct lengths)");
    }
  }
  std::array<double, 3> coef{};
  for (int k = 2; k >= 0; --k) {
    double s = y[k];
    for (int j = k + 1; j < 3; ++j) s -= x[k][j] * coef[j];
    coef[k] = s / x[k][k];
  }
  return CostModel{coef[0] / scale[0], coef[1] / scale[1], coef[2] / scale[2]};
}

bool NondecreasingUpTo(const CostModel& model, int batch_size, int64_t max_length) {
  // d time / dL = B·(b + 2·c·L) is linear in L: check both ends.
  const auto slope = [&](double l) { return model.b + 2 * model.c * l; };
  return model.BatchSeconds(batch_size, 1) > 0 && slope(1) >= 0 && slope(static_cast<double>(max_length)) >= 0;
}

}  // namespace sluice::advisor
