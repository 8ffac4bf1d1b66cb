#include "backend/base/yaml_node.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sluice {
namespace {

std::string KindName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null: return "nothing";
    case YAML::NodeType::Scalar: return absl::StrCat("'", node.Scalar(), "'");
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a map";
    default: return "an undefined node";
  }
}

}  // namespace

absl::StatusOr<YamlNode> YamlNode::Parse(std::string_view text, const std::string& file_label) {
  auto file = std::make_shared<const std::string>(file_label);
  try {
    YAML::Node root = YAML::Load(std::string(text));
    YAML::Mark start;
    start.line = 0;
    start.column = 0;
    return YamlNode(file, "", root, root.IsDefined() && !root.IsNull() ? root.Mark() : start);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(file_label, ":", e.mark.line + 1, ":", e.mark.column + 1,
                                                   ": YAML syntax error: ", e.msg));
  }
}

absl::StatusOr<YamlNode> YamlNode::LoadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open file"));
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), path);
}

absl::StatusOr<YamlNode> YamlNode::LoadString(const std::string& text, const std::string& file_label) {
  return Parse(text, file_label);
}

std::string YamlNode::ChildPath(std::string_view key) const {
  return path_.empty() ? std::string(key) : absl::StrCat(path_, ".", std::string(key));
}

bool YamlNode::Has(std::string_view key) const {
  if (!node_.IsMap()) return false;
  const YAML::Node& self = node_;
  YAML::Node child = self[std::string(key)];
  return child.IsDefined() && !child.IsNull();
}

absl::StatusOr<YamlNode> YamlNode::Required(std::string_view key) const {
  if (!node_.IsMap()) return Error(absl::StrCat("expected a map holding '", std::string(key), "', got ", KindName(node_)));
  const YAML::Node& self = node_;
  YAML::Node child = self[std::string(key)];
  if (!child.IsDefined() || child.IsNull()) {
    return Error(absl::StrCat("missing required key '", std::string(key), "'"));
  }
  return YamlNode(file_, ChildPath(key), child, child.Mark());
}

std::optional<YamlNode> YamlNode::Optional(std::string_view key) const {
  if (!Has(key)) return std::nullopt;
  const YAML::Node& self = node_;
  YAML::Node child = self[std::string(key)];
  return YamlNode(file_, ChildPath(key), child, child.Mark());
}

absl::Status YamlNode::ExpectMap() const {
  if (node_.IsMap()) return absl::OkStatus();
  return Error(absl::StrCat("expected a map, got ", KindName(node_)));
}

absl::Status YamlNode::CheckKeys(std::initializer_list<std::string_view> allowed) const {
  if (absl::Status st = ExpectMap(); !st.ok()) return st;
  for (const auto& entry : node_) {
    const std::string key = entry.first.Scalar();
    bool known = false;
    for (std::string_view a : allowed) known = known || (a == key);
    if (!known) {
      YamlNode at(file_, ChildPath(key), entry.first, entry.first.Mark());
      return at.Error(absl::StrCat("unknown key '", key, "' (allowed: ", absl::StrJoin(std::vector<std::string>(allowed.begin(), allowed.end()), ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> YamlNode::AsString() const {
  if (!node_.IsScalar()) return Error(absl::StrCat("expected a string, got ", KindName(node_)));
  return node_.Scalar();
}

absl::StatusOr<int64_t> YamlNode::AsInt() const {
  if (node_.IsScalar()) {
    try {
      return node_.as<int64_t>();
    } catch (const YAML::Exception&) {
    }
  }
  return Error(absl::StrCat("expected an integer, got ", KindName(node_)));
}

absl::StatusOr<double> YamlNode::AsDouble() const {
  if (node_.IsScalar()) {
    try {
      return node_.as<double>();
    } catch (const YAML::Exception&) {
    }
  }
  return Error(absl::StrCat("expected a number, got ", KindName(node_)));
}

absl::StatusOr<bool> YamlNode::AsBool() const {
  if (node_.IsScalar()) {
    try {
      return node_.as<bool>();
    } catch (const YAML::Exception&) {
    }
  }
  return Error(absl::StrCat("expected true or false, got ", KindName(node_)));
}

absl::StatusOr<std::vector<YamlNode>> YamlNode::AsSequence() const {
  if (!node_.IsSequence()) return Error(absl::StrCat("expected a list, got ", KindName(node_)));
  std::vector<YamlNode> items;
  for (size_t i = 0; i < node_.size(); ++i) {
    const YAML::Node& self = node_;
    YAML::Node item = self[i];
    items.push_back(YamlNode(file_, absl::StrCat(path_, "[", i, "]"), item, item.Mark()));
  }
  return items;
}

absl::StatusOr<std::vector<int64_t>> YamlNode::AsIntList() const {
  auto items = AsSequence();
  if (!items.ok()) return items.status();
  std::vector<int64_t> values;
  for (const YamlNode& item : *items) {
    auto v = item.AsInt();
    if (!v.ok()) return v.status();
    values.push_back(*v);
  }
  return values;
}

absl::Status YamlNode::Error(std::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(*file_, ":", mark_.line + 1, ":", mark_.column + 1, ": ",
                                                 path_.empty() ? "" : absl::StrCat(path_, ": "), std::string(message)));
}

}  // namespace sluice
