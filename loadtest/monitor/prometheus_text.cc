#include "loadtest/monitor/prometheus_text.h"

#include <httplib.h>

#include <cmath>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace sluice::loadtest {
namespace {

bool IsNameChar(char c, bool first) {
  return absl::ascii_isalpha(c) || c == '_' || c == ':' || (!first && absl::ascii_isdigit(c));
}

absl::StatusOr<double> ParseValue(absl::string_view text) {
  if (text == "+Inf" || text == "Inf") return INFINITY;
  if (text == "-Inf") return -INFINITY;
  if (text == "NaN") return NAN;
  double v = 0;
  if (!absl::SimpleAtod(text, &v)) return absl::InvalidArgumentError(absl::StrCat("bad value '", text, "'"));
  return v;
}

// Parses one sample line; `line_no` for messages.
absl::StatusOr<PromSample> ParseSample(absl::string_view line, int line_no) {
  auto fail = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("metrics line ", line_no, ": ", why, ": '", line, "'"));
  };
  PromSample sample;
  size_t i = 0;
  while (i < line.size() && IsNameChar(line[i], i == 0)) ++i;
  if (i == 0) return fail("no metric name");
  sample.name = std::string(line.substr(0, i));
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (true) {
      while (i < line.size() && line[i] == ' ') ++i;
      if (i < line.size() && line[i] == '}') {
        ++i;
        break;
      }
      const size_t key_start = i;
      while (i < line.size() && IsNameChar(line[i], i == key_start)) ++i;
      if (i == key_start || i >= line.size() || line[i] != '=') return fail("bad label name");
      std::string key(line.substr(key_start, i - key_start));
      if (++i >= line.size() || line[i] != '"') return fail("label value not quoted");
      std::string value;
      for (++i; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\' && i + 1 < line.size()) {
          const char next = line[++i];
          value += next == 'n' ? '\n' : next;
        } else {
          value += line[i];
        }
      }
      if (i >= line.size()) return fail("unterminated label value");
      ++i;  // closing quote
      sample.labels.emplace_back(std::move(key), std::move(value));
      while (i < line.size() && line[i] == ' ') ++i;
      if (i < line.size() && line[i] == ',') ++i;
    }
  }
  std::vector<absl::string_view> rest = absl::StrSplit(line.substr(i), ' ', absl::SkipEmpty());
  if (rest.empty() || rest.size() > 2) return fail("expected a value and an optional timestamp");
  absl::StatusOr<double> value = ParseValue(rest[0]);
  if (!value.ok()) return fail(value.status().message());
  sample.value = *value;
  return sample;
}

}  // namespace

std::string PromSample::Label(absl::string_view key) const {
  for (const auto& [k, v] : labels) {
    if (k == key) return v;
  }
  return "";
}

std::optional<double> PromScrape::Sum(absl::string_view name, absl::string_view key, absl::string_view value) const {
  std::optional<double> sum;
  for (const PromSample& s : samples) {
    if (s.name != name || (!key.empty() && s.Label(key) != value)) continue;
    sum = sum.value_or(0) + s.value;
  }
  return sum;
}

std::optional<double> PromScrape::Max(absl::string_view name) const {
  std::optional<double> max;
  for (const PromSample& s : samples) {
    if (s.name == name) max = std::max(max.value_or(-INFINITY), s.value);
  }
  return max;
}

std::vector<std::string> PromScrape::LabelValues(absl::string_view name, absl::string_view key) const {
  std::set<std::string> values;
  for (const PromSample& s : samples) {
    if (s.name == name && !s.Label(key).empty()) values.insert(s.Label(key));
  }
  return {values.begin(), values.end()};
}

std::vector<std::string> PromScrape::HistogramFamilies() const {
  std::set<std::string> families;
  for (const auto& [name, type] : types) {
    if (type == "histogram" || type == "summary") families.insert(name);
  }
  std::set<std::string> names;
  for (const PromSample& s : samples) names.insert(s.name);
  for (const std::string& n : names) {
    absl::string_view base = n;
    if (absl::ConsumeSuffix(&base, "_sum") && names.count(absl::StrCat(base, "_count"))) {
      families.insert(std::string(base));
    }
  }
  return {families.begin(), families.end()};
}

std::vector<std::string> PromScrape::Names() const {
  std::set<std::string> names;
  for (const PromSample& s : samples) names.insert(s.name);
  return {names.begin(), names.end()};
}

absl::StatusOr<PromScrape> ParsePrometheusText(absl::string_view text) {
  PromScrape scrape;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (words.size() >= 4 && words[1] == "TYPE") scrape.types[std::string(words[2])] = std::string(words[3]);
      continue;
    }
    absl::StatusOr<PromSample> sample = ParseSample(line, line_no);
    if (!sample.ok()) return sample.status();
    scrape.samples.push_back(*std::move(sample));
  }
  return scrape;
}

absl::StatusOr<std::string> HttpGet(const std::string& url, double timeout_s, const std::string& bearer_token) {
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "http://")) {
    return absl::InvalidArgumentError(absl::StrCat("'", url, "' is not an http:// URL"));
  }
  const size_t slash = rest.find('/');
  const std::string host_port(rest.substr(0, slash));
  const std::string path = slash == absl::string_view::npos ? "/" : std::string(rest.substr(slash));
  httplib::Client client(absl::StrCat("http://", host_port));
  const auto timeout = std::chrono::microseconds(static_cast<int64_t>(timeout_s * 1e6));
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  httplib::Headers headers;
  if (!bearer_token.empty()) headers.emplace("Authorization", "Bearer " + bearer_token);
  httplib::Result result = client.Get(path, headers);
  if (!result) {
    return absl::UnavailableError(absl::StrCat("GET ", url, ": ", httplib::to_string(result.error())));
  }
  if (result->status != 200) {
    return absl::UnavailableError(absl::StrCat("GET ", url, ": HTTP ", result->status));
  }
  return result->body;
}

}  // namespace sluice::loadtest
