// Test helper: runs the sluice-advisor binary (SLUICE_ADVISOR_BINARY) in a fresh temporary folder per test.
// Thread-safety: one fixture per test, as gtest makes them.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace sluice::advisor {

class AdvisorCliTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("sluice_advisor_test_" + std::to_string(::getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  // Runs sluice-advisor with `args`; returns its exit code, stdout+stderr in *output.
  int Run(const std::string& args, std::string* output) {
    const std::string out = (dir_ / "out.txt").string();
    const int rc = std::system((std::string(SLUICE_ADVISOR_BINARY) + " " + args + " > " + out + " 2>&1").c_str());
    std::ifstream in(out);
    std::stringstream text;
    text << in.rdbuf();
    *output = text.str();
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  }
  std::filesystem::path dir_;
};

}  // namespace sluice::advisor
