#include "loadtest/advisor/bench_timings.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace sluice::advisor {
namespace {

struct ModelTiming {
  std::string model;
  TimingPoint point;
};

std::optional<double> NumberMember(const rapidjson::Value& o, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    auto it = o.FindMember(key);
    if (it != o.MemberEnd() && it->value.IsNumber()) return it->value.GetDouble();
  }
  return std::nullopt;
}

void CollectJson(const rapidjson::Value& v, const std::string& model, std::vector<ModelTiming>* out) {
  if (v.IsArray()) {
    for (const rapidjson::Value& item : v.GetArray()) CollectJson(item, model, out);
    return;
  }
  if (!v.IsObject()) return;
  std::string here = model;
  for (const char* key : {"model", "name"}) {
    auto it = v.FindMember(key);
    if (it != v.MemberEnd() && it->value.IsString()) {
      here = it->value.GetString();
      break;
    }
  }
  const std::optional<double> batch = NumberMember(v, {"batch_size", "batch"});
  const std::optional<double> length = NumberMember(v, {"length"});
  std::optional<double> seconds = NumberMember(v, {"seconds", "time_s"});
  if (!seconds) {
    if (std::optional<double> ms = NumberMember(v, {"p50_ms", "median_ms", "time_ms", "ms"})) seconds = *ms / 1000;
  }
  if (batch && length && seconds) {
    out->push_back({here, {static_cast<int>(*batch), static_cast<int64_t>(*length), *seconds}});
  }
  for (const auto& member : v.GetObject()) CollectJson(member.value, here, out);
}

// sluice-bench-backend's stdout: "<model> on <device>: ..." then rows of six numbers.
std::vector<ModelTiming> CollectText(absl::string_view text) {
  std::vector<ModelTiming> out;
  std::string model;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (const size_t on = line.find(" on "); on != absl::string_view::npos && line.find(':') != absl::string_view::npos &&
                                             line.find(' ') == on) {
      model = std::string(line.substr(0, on));
      continue;
    }
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() != 6 || model.empty()) continue;
    int batch = 0;
    int64_t length = 0;
    double p50_ms = 0;
    if (absl::SimpleAtoi(fields[0], &batch) && absl::SimpleAtoi(fields[1], &length) &&
        absl::SimpleAtod(fields[2], &p50_ms)) {
      out.push_back({model, {batch, length, p50_ms / 1000}});
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<TimingPoint>> ParseBenchTimings(absl::string_view text, const std::string& model,
                                                           const std::string& source_name) {
  std::vector<ModelTiming> all;
  const absl::string_view trimmed = absl::StripLeadingAsciiWhitespace(text);
  if (!trimmed.empty() && (trimmed.front() == '{' || trimmed.front() == '[')) {
    rapidjson::Document doc;
    doc.Parse(trimmed.data(), trimmed.size());
    if (!doc.HasParseError()) {
      CollectJson(doc, "", &all);
    } else if (all = CollectText(text); all.empty()) {  // "[time] [info] ..." log lines look like JSON at first
      return absl::InvalidArgumentError(absl::StrCat(source_name, ": invalid JSON at offset ", doc.GetErrorOffset(),
                                                     ": ", rapidjson::GetParseError_En(doc.GetParseError())));
    }
  } else {
    all = CollectText(text);
  }
  std::set<std::string> models;
  for (const ModelTiming& t : all) models.insert(t.model);
  if (model.empty() && models.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": timings of several models (",
                                                   absl::StrJoin(models, ", "), "); name one with --model"));
  }
  std::vector<TimingPoint> points;
  for (const ModelTiming& t : all) {
    if (model.empty() || t.model == model) points.push_back(t.point);
  }
  if (points.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": no timings", model.empty() ? "" : " of model '",
                                                   model, model.empty() ? "" : "'",
                                                   " (expected batch_size, length and p50_ms per bucket)"));
  }
  return points;
}

absl::StatusOr<std::vector<TimingPoint>> ReadBenchTimings(const std::string& path, const std::string& model) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  return ParseBenchTimings(text.str(), model, path);
}

}  // namespace sluice::advisor
