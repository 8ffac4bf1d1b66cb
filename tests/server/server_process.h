// Test helper: runs the real sluice-server binary on loopback with ephemeral ports and a generated config,
// waits for its READY line, and stops it with a signal. Paths come from compile definitions
// (SLUICE_SERVER_BINARY, SLUICE_MODELS_DIR).
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
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace sluice::testing {

class ServerProcess {
 public:
  // `extra_yaml` is appended to the config; `models` limits the repository (empty: every model in it);
  // `source_repository` is where models come from (default: the exported example models).
  explicit ServerProcess(const std::string& extra_yaml = "", const std::vector<std::string>& models = {},
                         const std::string& source_repository = SLUICE_MODELS_DIR) {
    dir_ = std::filesystem::temp_directory_path() /
           ("sluice_fe_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    std::filesystem::remove_all(dir_);  // left by an earlier run whose pid this one reuses
    std::filesystem::create_directories(dir_ / "models");
    std::string repository = source_repository;
    if (!models.empty()) {
      repository = (dir_ / "models").string();
      for (const std::string& m : models) {
        std::filesystem::create_directory_symlink(std::filesystem::path(source_repository) / m, dir_ / "models" / m);
      }
    }
    std::ofstream(dir_ / "server.yaml") << "grpc: {address: 127.0.0.1:0}\nhttp: {address: 127.0.0.1:0}\n"
                                        << "model_repository: " << repository << "\nlog_level: info\n"
                                        << extra_yaml;
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
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(180);
    while (std::chrono::steady_clock::now() < until) {
      const std::string text = Log();
      const size_t at = text.find("sluice-server READY grpc=");
      if (at != std::string::npos && text.find('\n', at) != std::string::npos) {
        std::istringstream line(text.substr(at));
        std::string word;
        while (line >> word) {
          if (word.rfind("grpc=", 0) == 0) grpc_address_ = word.substr(5);
          if (word.rfind("http=", 0) == 0) http_address_ = word.substr(5);
          if (!http_address_.empty()) break;
        }
        return;
      }
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  ~ServerProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    // Keep the config and log of a failing test for its reader; clean up after passing ones.
    std::error_code ignored;
    if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir_, ignored);
  }

  bool ready() const { return pid_ > 0 && !http_address_.empty(); }
  const std::string& grpc_address() const { return grpc_address_; }
  const std::string& http_address() const { return http_address_; }
  int http_port() const { return std::stoi(http_address_.substr(http_address_.rfind(':') + 1)); }
  const std::filesystem::path& dir() const { return dir_; }
  std::string Log() const {
    std::ifstream in(log_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void Signal(int sig) { ::kill(pid_, sig); }
  // Waits for exit; returns the exit code (or -signal). -1000 on timeout.
  int WaitExit(std::chrono::seconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1000;
  }

 private:
  static inline int counter_ = 0;
  std::filesystem::path dir_;
  std::string log_;
  pid_t pid_ = -1;
  std::string grpc_address_, http_address_;
};

}  // namespace sluice::testing
