// A yaml-cpp node that remembers its file and key path, so that every config error names the file, the key and
// the line: "models/asr/config.yaml:12:5: buckets.lengths[2]: expected a positive integer, got '-3'".
// yaml-cpp exceptions never escape: every accessor returns absl::Status(Or).
// Thread-safety: immutable after construction; concurrent reads are safe.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "yaml-cpp/yaml.h"

namespace sluice {

class YamlNode {
 public:
  // Parses a whole file; a syntax error names the file and line.
  static absl::StatusOr<YamlNode> LoadFile(const std::string& path);
  // Parses text as if it came from `file_label` (for tests and embedded configs).
  static absl::StatusOr<YamlNode> LoadString(const std::string& text, const std::string& file_label);

  const std::string& file() const { return *file_; }

  bool IsMap() const { return node_.IsMap(); }
  bool Has(std::string_view key) const;

  // The child at `key`; an error naming the key when it is absent.
  absl::StatusOr<YamlNode> Required(std::string_view key) const;
  // The child at `key`, or nullopt when absent or null.
  std::optional<YamlNode> Optional(std::string_view key) const;

  // Fails, naming the first key that is not in `allowed`, so typos never pass silently. REQUIRES: IsMap().
  absl::Status CheckKeys(std::initializer_list<std::string_view> allowed) const;
  // Fails unless this node is a map (naming what was found instead).
  absl::Status ExpectMap() const;

  absl::StatusOr<std::string> AsString() const;
  absl::StatusOr<int64_t> AsInt() const;
  absl::StatusOr<double> AsDouble() const;
  absl::StatusOr<bool> AsBool() const;
  absl::StatusOr<std::vector<YamlNode>> AsSequence() const;
  absl::StatusOr<std::vector<int64_t>> AsIntList() const;

  // An InvalidArgument error located at this node: "file:line:col: key.path: message".
  absl::Status Error(std::string_view message) const;

 private:
  YamlNode(std::shared_ptr<const std::string> file, std::string path, YAML::Node node, YAML::Mark mark)
      : file_(std::move(file)), path_(std::move(path)), node_(std::move(node)), mark_(mark) {}
  static absl::StatusOr<YamlNode> Parse(std::string_view text, const std::string& file_label);
  std::string ChildPath(std::string_view key) const;

  std::shared_ptr<const std::string> file_;
  std::string path_;
  YAML::Node node_;
  YAML::Mark mark_;  // this node's position; the parent's when the node is absent
};

}  // namespace sluice
