#include "server/server_config.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "backend/status_macros.h"
#include "backend/yaml_node.h"

namespace sluice {
namespace {

// "host:port" with a port in 1..65535 (port 0 is allowed too: it asks the OS for a free port, as tests do).
absl::Status ValidateAddress(const YamlNode& node, const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return node.Error(absl::StrCat("'", address, "' is not host:port"));
  const std::string port = address.substr(colon + 1);
  int value = -1;
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      (value = std::stoi(port)) > 65535) {
    return node.Error(absl::StrCat("'", address, "' has no valid port (0..65535)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ParseListener(const YamlNode& root, std::string_view key, std::string fallback) {
  std::optional<YamlNode> section = root.Optional(key);
  if (!section) return fallback;
  SLUICE_RETURN_IF_ERROR(section->CheckKeys({"address"}));
  SLUICE_ASSIGN_OR_RETURN(YamlNode address, section->Required("address"));
  SLUICE_ASSIGN_OR_RETURN(std::string text, address.AsString());
  SLUICE_RETURN_IF_ERROR(ValidateAddress(address, text));
  return text;
}

}  // namespace

absl::StatusOr<ServerConfig> LoadServerConfig(const std::string& path) {
  SLUICE_ASSIGN_OR_RETURN(YamlNode root, YamlNode::LoadFile(path));
  SLUICE_RETURN_IF_ERROR(root.CheckKeys({"grpc", "http", "model_repository", "log_level"}));
  ServerConfig config;
  config.config_path = path;
  SLUICE_ASSIGN_OR_RETURN(config.grpc_address, ParseListener(root, "grpc", config.grpc_address));
  SLUICE_ASSIGN_OR_RETURN(config.http_address, ParseListener(root, "http", config.http_address));

  SLUICE_ASSIGN_OR_RETURN(YamlNode repository, root.Required("model_repository"));
  SLUICE_ASSIGN_OR_RETURN(std::string repository_text, repository.AsString());
  std::filesystem::path repository_path(repository_text);
  if (repository_path.is_relative()) {
    repository_path = std::filesystem::absolute(std::filesystem::path(path).parent_path() / repository_path);
  }
  config.model_repository = repository_path.lexically_normal().string();

  if (auto level = root.Optional("log_level")) {
    SLUICE_ASSIGN_OR_RETURN(config.log_level, level->AsString());
    static constexpr std::string_view kLevels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
    bool known = false;
    for (std::string_view l : kLevels) known = known || l == config.log_level;
    if (!known) {
      return level->Error(absl::StrCat("unknown log level '", config.log_level,
                                       "' (expected trace, debug, info, warn, error, critical or off)"));
    }
  }
  return config;
}

}  // namespace sluice
