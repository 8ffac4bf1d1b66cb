#include "backend/base/server_config.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "backend/base/status_macros.h"
#include "backend/base/yaml_node.h"

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

absl::StatusOr<std::string> ParseAddress(const YamlNode& section) {
  SLUICE_ASSIGN_OR_RETURN(YamlNode address, section.Required("address"));
  SLUICE_ASSIGN_OR_RETURN(std::string text, address.AsString());
  SLUICE_RETURN_IF_ERROR(ValidateAddress(address, text));
  return text;
}

// An optional integer key of `section` that must lie in [min, max]; `value` keeps its default when absent.
absl::Status ParseBoundedInt(const YamlNode& section, std::string_view key, int64_t min, int64_t max,
                             int64_t& value) {
  std::optional<YamlNode> node = section.Optional(key);
  if (!node) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(int64_t parsed, node->AsInt());
  if (parsed < min || parsed > max) {
    return node->Error(absl::StrCat("must be between ", min, " and ", max, ", got ", parsed));
  }
  value = parsed;
  return absl::OkStatus();
}

std::string ResolvePath(const std::string& config_path, const std::string& text) {
  std::filesystem::path path(text);
  if (path.is_relative()) {
    // The error_code forms: the throwing ones end the process on a path the OS refuses (found by fuzzing: a name
    // longer than NAME_MAX made is_regular_file throw ENAMETOOLONG).
    std::error_code error;
    std::filesystem::path absolute =
        std::filesystem::absolute(std::filesystem::path(config_path).parent_path() / path, error);
    path = error ? std::filesystem::path(config_path).parent_path() / path : absolute;
  }
  return path.lexically_normal().string();
}

absl::Status ParseTls(const YamlNode& tls, const std::string& config_path, ServerConfig& config) {
  SLUICE_RETURN_IF_ERROR(tls.CheckKeys({"cert", "key"}));
  for (auto [key, target] : {std::pair{"cert", &config.tls_cert_path}, std::pair{"key", &config.tls_key_path}}) {
    SLUICE_ASSIGN_OR_RETURN(YamlNode node, tls.Required(key));
    SLUICE_ASSIGN_OR_RETURN(std::string text, node.AsString());
    *target = ResolvePath(config_path, text);
    std::error_code error;
    if (!std::filesystem::is_regular_file(*target, error)) {
      return node.Error(absl::StrCat("file '", *target, "' ",
                                     error ? absl::StrCat("cannot be read: ", error.message()) : "does not exist"));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseVoice(const YamlNode& voice, VoiceConfig& config) {
  SLUICE_RETURN_IF_ERROR(voice.CheckKeys({"default_model", "stream_idle_timeout_ms", "decode_threads",
                                          "max_waiting_decodes", "max_decode_bytes"}));
  if (auto model = voice.Optional("default_model")) {
    SLUICE_ASSIGN_OR_RETURN(config.default_model, model->AsString());
    if (config.default_model.empty()) return model->Error("must name a speech model");
    // The models load after the config: keep where the key sits for the check against the served models.
    const std::string where(model->Error("").message());
    config.default_model_where = where;
  }
  SLUICE_RETURN_IF_ERROR(ParseBoundedInt(voice, "stream_idle_timeout_ms", 100, 86400000, config.stream_idle_timeout_ms));
  SLUICE_RETURN_IF_ERROR(ParseBoundedInt(voice, "decode_threads", 1, 256, config.decode_threads));
  SLUICE_RETURN_IF_ERROR(ParseBoundedInt(voice, "max_waiting_decodes", 0, 100000, config.max_waiting_decodes));
  SLUICE_RETURN_IF_ERROR(
      ParseBoundedInt(voice, "max_decode_bytes", 1 << 20, int64_t{1} << 40, config.max_decode_bytes));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ServerConfig> LoadServerConfig(const std::string& path) {
  SLUICE_ASSIGN_OR_RETURN(YamlNode root, YamlNode::LoadFile(path));
  SLUICE_RETURN_IF_ERROR(root.CheckKeys(
      {"grpc", "http", "model_repository", "log_level", "max_message_bytes", "tls", "auth", "drain_grace_seconds",
       "cost", "voice"}));
  ServerConfig config;
  config.config_path = path;
  if (auto grpc = root.Optional("grpc")) {
    SLUICE_RETURN_IF_ERROR(grpc->CheckKeys({"address", "keepalive_time_ms", "keepalive_timeout_ms"}));
    SLUICE_ASSIGN_OR_RETURN(config.grpc_address, ParseAddress(*grpc));
    SLUICE_RETURN_IF_ERROR(ParseBoundedInt(*grpc, "keepalive_time_ms", 1000, 86400000, config.keepalive_time_ms));
    SLUICE_RETURN_IF_ERROR(ParseBoundedInt(*grpc, "keepalive_timeout_ms", 100, 3600000, config.keepalive_timeout_ms));
  }
  if (auto http = root.Optional("http")) {
    SLUICE_RETURN_IF_ERROR(http->CheckKeys({"address", "threads", "max_connections", "max_header_bytes",
                                            "header_timeout_ms", "body_timeout_ms", "idle_timeout_ms"}));
    SLUICE_ASSIGN_OR_RETURN(config.http_address, ParseAddress(*http));
    HttpConfig& h = config.http;
    SLUICE_RETURN_IF_ERROR(ParseBoundedInt(*http, "threads", 1, 256, h.threads));
    SLUICE_RETURN_IF_ERROR(ParseBoundedInt(*http, "max_connections", 1, 1000000, h.max_connections));
    SLUICE_RETURN_IF_ERROR(ParseBoundedInt(*http, "max_header_bytes", 1024, 1 << 20, h.max_header_bytes));
    SLUICE_RETURN_IF_ERROR(ParseBoundedInt(*http, "header_timeout_ms", 100, 3600000, h.header_timeout_ms));
    SLUICE_RETURN_IF_ERROR(ParseBoundedInt(*http, "body_timeout_ms", 100, 3600000, h.body_timeout_ms));
    SLUICE_RETURN_IF_ERROR(ParseBoundedInt(*http, "idle_timeout_ms", 100, 3600000, h.idle_timeout_ms));
  }
  SLUICE_RETURN_IF_ERROR(ParseBoundedInt(root, "max_message_bytes", 1024, int64_t{2047} << 20,
                                         config.max_message_bytes));
  if (auto tls = root.Optional("tls")) SLUICE_RETURN_IF_ERROR(ParseTls(*tls, path, config));
  if (auto auth = root.Optional("auth")) {
    SLUICE_RETURN_IF_ERROR(auth->CheckKeys({"bearer_token"}));
    SLUICE_ASSIGN_OR_RETURN(YamlNode token, auth->Required("bearer_token"));
    SLUICE_ASSIGN_OR_RETURN(config.bearer_token, token.AsString());
    if (config.bearer_token.empty() || config.bearer_token.find_first_of(" \t\r\n") != std::string::npos) {
      return token.Error("must be a non-empty token without whitespace");
    }
  }
  if (auto grace = root.Optional("drain_grace_seconds")) {
    SLUICE_ASSIGN_OR_RETURN(config.drain_grace_seconds, grace->AsDouble());
    if (!(config.drain_grace_seconds >= 0 && config.drain_grace_seconds <= 3600)) {
      return grace->Error("must be between 0 and 3600 seconds");
    }
  }

  if (auto cost = root.Optional("cost")) {
    SLUICE_ASSIGN_OR_RETURN(config.cost,
                            ParseCostConfig(*cost, std::filesystem::path(path).parent_path().string()));
  }

  if (auto voice = root.Optional("voice")) SLUICE_RETURN_IF_ERROR(ParseVoice(*voice, config.voice));

  SLUICE_ASSIGN_OR_RETURN(YamlNode repository, root.Required("model_repository"));
  SLUICE_ASSIGN_OR_RETURN(std::string repository_text, repository.AsString());
  config.model_repository = ResolvePath(path, repository_text);

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
