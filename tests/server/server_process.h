// Test helper: runs the real sluice-server binary on loopback with ephemeral ports and a generated config,
// waits for its READY line (or, on request, its LISTENING line), and stops it with a signal. Paths come from
// compile definitions (SLUICE_SERVER_BINARY, SLUICE_MODELS_DIR).
// Thread-safety: one thread per ServerProcess.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace sluice::testing {

class ServerProcess {
 public:
  // Everything a server can be started with.
  struct Options {
    std::string extra_yaml;                     // appended to the config
    // Limits the repository. Empty: every model in it, except in the example repository, where it means the two
    // original examples (asr_ctc, text_embed): the example LLM and the digits recognizer add seconds of loading and
    // hundreds of MB to every server start, so the tests that want them name them.
    std::vector<std::string> models;
    std::string source_repository = SLUICE_MODELS_DIR;  // where models come from
    std::string grpc_address = "127.0.0.1:0";   // e.g. another server's address, to test a port in use
    std::string http_address = "127.0.0.1:0";
    std::string http_settings;                  // more keys of the `http:` map, e.g. "header_timeout_ms: 1500"
    // Return as soon as the log shows "sluice-server LISTENING grpc=... http=..." (printed before the models
    // load) instead of waiting for READY; WaitForReady() waits for the rest.
    bool return_when_listening = false;
    std::chrono::seconds start_timeout{180};
  };

  // `extra_yaml` is appended to the config; `models` limits the repository (see Options::models);
  // `source_repository` is where models come from (default: the exported example models).
  explicit ServerProcess(const std::string& extra_yaml = "", const std::vector<std::string>& models = {},
                         const std::string& source_repository = SLUICE_MODELS_DIR) {
    Options options;
    options.extra_yaml = extra_yaml;
    options.models = models;
    options.source_repository = source_repository;
    Launch(options);
  }
  explicit ServerProcess(const Options& options) { Launch(options); }

  ~ServerProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    // Keep the config and log of a failing test for its reader; clean up after passing ones.
    std::error_code ignored;
    if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir_, ignored);
  }

  // Running, and its addresses known (after READY; after LISTENING with Options::return_when_listening).
  bool ready() const { return pid_ > 0 && !http_address_.empty(); }
  const std::string& grpc_address() const { return grpc_address_; }
  const std::string& http_address() const { return http_address_; }
  int http_port() const { return std::stoi(http_address_.substr(http_address_.rfind(':') + 1)); }
  int grpc_port() const { return std::stoi(grpc_address_.substr(grpc_address_.rfind(':') + 1)); }
  const std::filesystem::path& dir() const { return dir_; }
  std::string Log() const {
    std::ifstream in(log_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void Signal(int sig) { ::kill(pid_, sig); }
  // Waits for exit; returns the exit code (or -signal). -1000 on timeout. An exit already seen (the server ended
  // before the line it was waited for) is returned at once.
  int WaitExit(std::chrono::seconds timeout) {
    if (pid_ <= 0 && exit_code_) return *exit_code_;
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        RecordExit(status);
        return *exit_code_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1000;
  }

  // The server's process id while it runs (-1 once it has been seen to end), e.g. for /proc/<pid>/status.
  pid_t pid() const { return pid_; }
  // Whether the process still runs (reaps it and records how it ended when it has ended).
  bool alive() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      RecordExit(status);
      return false;
    }
    return true;
  }
  // How the process ended (exit code, or -signal), once it has been seen to end.
  std::optional<int> exit_code() const { return exit_code_; }
  // After Options::return_when_listening: waits for the READY line (true), or the process's end or the timeout.
  bool WaitForReady(std::chrono::seconds timeout) { return WaitForLine("sluice-server READY grpc=", timeout); }

 private:
  void Launch(const Options& options) {
    dir_ = std::filesystem::temp_directory_path() /
           ("sluice_fe_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    std::filesystem::remove_all(dir_);  // left by an earlier run whose pid this one reuses
    std::filesystem::create_directories(dir_ / "models");
    std::string repository = options.source_repository;
    std::vector<std::string> models = options.models;
    if (models.empty() && options.source_repository == SLUICE_MODELS_DIR) models = {"asr_ctc", "text_embed"};
    if (!models.empty()) {
      repository = (dir_ / "models").string();
      for (const std::string& m : models) {
        std::filesystem::create_directory_symlink(std::filesystem::path(options.source_repository) / m,
                                                  dir_ / "models" / m);
      }
    }
    std::ofstream(dir_ / "server.yaml") << "grpc: {address: " << options.grpc_address << "}\n"
                                        << "http: {address: " << options.http_address
                                        << (options.http_settings.empty() ? "" : ", " + options.http_settings)
                                        << "}\nmodel_repository: " << repository << "\nlog_level: info\n"
                                        << options.extra_yaml;
    log_ = (dir_ / "server.log").string();
    const std::string config = (dir_ / "server.yaml").string();
    // Everything the child needs is prepared here: after fork() in a process with gRPC threads the child calls
    // only async-signal-safe functions (open, dup2, execl).
    const int log_fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(log_fd, 1);
      ::dup2(log_fd, 2);
      ::execl(SLUICE_SERVER_BINARY, SLUICE_SERVER_BINARY, "--config", config.c_str(), (char*)nullptr);
      ::_exit(127);
    }
    ::close(log_fd);
    WaitForLine(options.return_when_listening ? "sluice-server LISTENING grpc=" : "sluice-server READY grpc=",
                options.start_timeout);
  }

  // Polls the log for a complete line starting with `prefix` and takes the grpc=/http= addresses from it. False
  // when the process ended first (exit_code() says how) or on timeout.
  bool WaitForLine(const std::string& prefix, std::chrono::seconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      const std::string text = Log();
      const size_t at = text.find(prefix);
      const size_t end = at == std::string::npos ? std::string::npos : text.find('\n', at);
      if (end != std::string::npos) {
        std::istringstream line(text.substr(at, end - at));
        std::string word;
        while (line >> word) {
          if (word.rfind("grpc=", 0) == 0) grpc_address_ = word.substr(5);
          if (word.rfind("http=", 0) == 0) http_address_ = word.substr(5);
          if (!http_address_.empty()) break;
        }
        return true;
      }
      if (!alive()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  void RecordExit(int status) {
    pid_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }

  static inline int counter_ = 0;
  std::filesystem::path dir_;
  std::string log_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::string grpc_address_, http_address_;
};

}  // namespace sluice::testing
