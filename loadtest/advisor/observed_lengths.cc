#include "loadtest/advisor/observed_lengths.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace sluice::advisor {
namespace {

// A positive integer length, written as an integer or as a float with an integral value.
bool ParseLength(absl::string_view field, int64_t* out) {
  field = absl::StripAsciiWhitespace(field);
  if (field.size() >= 2 && field.front() == '"' && field.back() == '"') field = field.substr(1, field.size() - 2);
  if (absl::SimpleAtoi(field, out)) return *out > 0;
  double d = 0;
  if (!absl::SimpleAtod(field, &d) || !std::isfinite(d) || d < 1 || d > 9e15 || d != std::floor(d)) return false;
  *out = static_cast<int64_t>(d);
  return true;
}

struct LineParser {
  std::string column;
  std::string source;
  int csv_index = -1;  // resolved CSV column
  bool csv_header_seen = false;

  absl::Status Error(int line, const std::string& message) const {
    return absl::InvalidArgumentError(absl::StrCat(source, ":", line, ": ", message));
  }

  absl::StatusOr<int64_t> Json(absl::string_view text, int line) const {
    rapidjson::Document doc;
    doc.Parse(text.data(), text.size());
    if (doc.HasParseError() || !doc.IsObject()) return Error(line, "not a JSON object");
    const std::string key = column.empty() ? "length" : column;
    auto it = doc.FindMember(key.c_str());
    if (it == doc.MemberEnd()) return Error(line, absl::StrCat("no key '", key, "'"));
    int64_t v = 0;
    if (it->value.IsInt64() && it->value.GetInt64() > 0) return it->value.GetInt64();
    if (it->value.IsNumber() && ParseLength(absl::StrCat(it->value.GetDouble()), &v)) return v;
    if (it->value.IsString() && ParseLength(it->value.GetString(), &v)) return v;
    return Error(line, absl::StrCat("'", key, "' is not a positive integer length"));
  }

  // Returns 0 for a header row (consumed).
  absl::StatusOr<int64_t> Csv(absl::string_view text, int line) {
    std::vector<std::string> fields = absl::StrSplit(text, ',');
    for (std::string& f : fields) f = std::string(absl::StripAsciiWhitespace(f));
    if (csv_index < 0) {
      int index = -1;
      const bool numeric_column = !column.empty() && absl::SimpleAtoi(column, &index);
      int64_t probe = 0;
      // A header row: every field a name (starts with a letter, '_' or a quote), none a length.
      const bool has_header = !csv_header_seen && std::all_of(fields.begin(), fields.end(), [&](const std::string& f) {
        return !f.empty() && !ParseLength(f, &probe) &&
               (absl::ascii_isalpha(static_cast<unsigned char>(f[0])) || f[0] == '_' || f[0] == '"');
      });
      if (has_header) {
        csv_header_seen = true;
        if (numeric_column) {
          csv_index = index;
        } else {
          const std::string want = column.empty() ? "length" : column;
          for (size_t i = 0; i < fields.size(); ++i) {
            std::string name = fields[i];
            if (name.size() >= 2 && name.front() == '"' && name.back() == '"') name = name.substr(1, name.size() - 2);
            if (name == want) csv_index = static_cast<int>(i);
          }
          if (csv_index < 0) {
            if (!column.empty()) return Error(line, absl::StrCat("the header has no column '", want, "'"));
            csv_index = 0;
          }
        }
        return 0;
      }
      if (!column.empty() && !numeric_column) {
        return Error(line, absl::StrCat("--column '", column, "' needs a header row naming the columns"));
      }
      csv_index = numeric_column ? index : 0;
    }
    if (csv_index < 0 || static_cast<size_t>(csv_index) >= fields.size()) {
      return Error(line, absl::StrCat("no column ", csv_index, " (", fields.size(), " fields)"));
    }
    int64_t v = 0;
    if (!ParseLength(fields[csv_index], &v)) {
      return Error(line, absl::StrCat("'", fields[csv_index], "' is not a positive integer length"));
    }
    return v;
  }
};

}  // namespace

absl::StatusOr<std::vector<int64_t>> ParseLengths(absl::string_view text, const std::string& column,
                                                  const std::string& source_name) {
  LineParser parser{column, source_name};
  std::vector<int64_t> lengths;
  int line_number = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_number;
    const absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line.front() == '#') continue;
    if (line.front() == '{') {
      absl::StatusOr<int64_t> v = parser.Json(line, line_number);
      if (!v.ok()) return v.status();
      lengths.push_back(*v);
    } else if (line.find(',') != absl::string_view::npos || parser.csv_index >= 0 || parser.csv_header_seen) {
      absl::StatusOr<int64_t> v = parser.Csv(line, line_number);
      if (!v.ok()) return v.status();
      if (*v > 0) lengths.push_back(*v);
    } else {
      int64_t v = 0;
      if (!ParseLength(line, &v)) {
        if (lengths.empty() && !parser.csv_header_seen) {  // a one-column CSV's header
          absl::StatusOr<int64_t> header = parser.Csv(line, line_number);
          if (!header.ok()) return header.status();
          if (*header == 0) continue;
        }
        return parser.Error(line_number, absl::StrCat("'", line, "' is not a positive integer length"));
      }
      lengths.push_back(v);
    }
  }
  if (lengths.empty()) return absl::InvalidArgumentError(absl::StrCat(source_name, ": no lengths"));
  return lengths;
}

absl::StatusOr<std::vector<int64_t>> ReadLengthsFile(const std::string& path, const std::string& column) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  return ParseLengths(text.str(), column, path);
}

std::vector<LengthCount> MergeLengthCounts(std::vector<LengthCount> counts) {
  std::sort(counts.begin(), counts.end(), [](const LengthCount& x, const LengthCount& y) { return x.length < y.length; });
  std::vector<LengthCount> merged;
  for (const LengthCount& c : counts) {
    if (c.count <= 0) continue;
    if (!merged.empty() && merged.back().length == c.length) {
      merged.back().count += c.count;
    } else {
      merged.push_back(c);
    }
  }
  return merged;
}

std::vector<LengthCount> CountLengths(const std::vector<int64_t>& lengths) {
  std::vector<LengthCount> counts;
  counts.reserve(lengths.size());
  for (int64_t l : lengths) counts.push_back({l, 1});
  return MergeLengthCounts(std::move(counts));
}

Candidates BuildCandidates(const std::vector<int64_t>& lengths, int64_t multiple_of, int64_t max_candidates) {
  return BuildCandidates(CountLengths(lengths), multiple_of, max_candidates);
}

Candidates BuildCandidates(const std::vector<LengthCount>& counts, int64_t multiple_of, int64_t max_candidates) {
  std::map<int64_t, std::pair<double, double>> by_length;  // rounded length -> (requests, real steps)
  double total = 0;
  for (const LengthCount& c : counts) {
    if (c.count <= 0) continue;
    const int64_t rounded = (c.length + multiple_of - 1) / multiple_of * multiple_of;
    auto& [requests, steps] = by_length[rounded];
    requests += static_cast<double>(c.count);
    steps += static_cast<double>(c.length) * static_cast<double>(c.count);
    total += static_cast<double>(c.count);
  }
  Candidates c;
  c.distinct_lengths = static_cast<int64_t>(by_length.size());
  if (c.distinct_lengths <= max_candidates) {
    for (const auto& [length, v] : by_length) {
      c.lengths.push_back(length);
      c.requests.push_back(v.first);
      c.real_steps.push_back(v.second);
    }
    return c;
  }
  // Quantile groups: close group g once the cumulative count reaches (g + 1) / max_candidates of all requests.
  c.merged = true;
  double cumulative = 0, group_requests = 0, group_steps = 0;
  int64_t group = 0;
  for (auto it = by_length.begin(); it != by_length.end(); ++it) {
    cumulative += it->second.first;
    group_requests += it->second.first;
    group_steps += it->second.second;
    const bool last = std::next(it) == by_length.end();
    if (last || cumulative >= total * static_cast<double>(group + 1) / static_cast<double>(max_candidates)) {
      c.lengths.push_back(it->first);
      c.requests.push_back(group_requests);
      c.real_steps.push_back(group_steps);
      group_requests = group_steps = 0;
      while (cumulative >= total * static_cast<double>(group + 1) / static_cast<double>(max_candidates)) ++group;
    }
  }
  return c;
}

}  // namespace sluice::advisor
