// intra_op_threads and cores hold for every pool a graph reaches: an asr_ctc graph at batch 1, largest bucket, run
// in a loop on an instance thread with intra_op_threads 1 spends its CPU time on that one thread (before the BLAS
// pool was capped, Debian's pthread OpenBLAS put 15-30 % of it on its pool thread, more on an idle machine), and `cores` pins the
// instance thread and the OpenMP threads it starts. Measured with per-thread CPU time from /proc/self/task, so a
// loaded machine (other jobs on the cores) slows the loop but does not change where its CPU time goes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "backend/backend.h"
#include "backend/base/model_config.h"
#include "tests/backend/test_models.h"

namespace sluice {
namespace {

using ::sluice::testing::ExampleModelDir;
using ::testing::HasSubstr;

constexpr int64_t kLongest = 256000;

struct ThreadTimes {
  double cpu_seconds = 0;  // utime + stime
  std::string allowed;     // Cpus_allowed_list
};

// CPU time and allowed CPUs of every thread of this process, by thread id.
std::map<int, ThreadTimes> SampleThreads() {
  std::map<int, ThreadTimes> threads;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream stat_file(entry.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;  // the thread ended while we read
    std::istringstream fields(stat.substr(paren + 2));
    std::string field;
    double utime = 0, stime = 0;
    for (int i = 0; fields >> field; ++i) {  // i = 0 is field 3 (state); utime is field 14, stime 15
      if (i == 11) utime = std::stod(field);
      if (i == 12) stime = std::stod(field);
    }
    ThreadTimes& t = threads[std::stoi(entry.path().filename().string())];
    t.cpu_seconds = (utime + stime) / ticks;
    std::ifstream status(entry.path() / "status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0) t.allowed = line.substr(line.find_first_not_of(" \t", 18));
    }
  }
  return threads;
}

// asr_ctc reduced to its largest batch-1 bucket (loading all 20 buckets would take most of the test's time).
std::unique_ptr<ModelConfig> LargestBatchOneBucket() {
  absl::StatusOr<ModelConfig> config = LoadModelConfig(ExampleModelDir("asr_ctc"));
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return nullptr;
  config->buckets.batch_sizes = {1};
  config->buckets.lengths = {kLongest};
  return std::make_unique<ModelConfig>(*config);
}

PaddedBatch OneLongRow() {
  PaddedBatch batch{1, kLongest, {}, {kLongest}};
  HostTensor audio = HostTensor::Zeros(DataType::kFp32, {1, kLongest});
  float phase = 0;
  for (float& v : audio.values<float>()) v = std::sin(phase += 0.05f);
  batch.inputs.push_back(std::move(audio));
  return batch;
}

struct LoopResult {
  int tid = 0;  // the instance thread
  int runs = 0;
  double wall_seconds = 0;
  std::map<int, ThreadTimes> before, after;
  std::string instance_thread_affinity;  // sched_getaffinity of the instance thread after its first Execute
  bool ok = true;
};

std::string CpuListOf(const cpu_set_t& set) {
  std::string out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) out += (out.empty() ? "" : ",") + std::to_string(cpu);
  }
  return out;
}

// Executes the batch on a fresh thread (as the scheduler's instance thread would) until that thread has used
// `cpu_budget` seconds of CPU (at most 30 s of wall time), sampling every thread's CPU time around the loop.
LoopResult RunOnInstanceThread(Backend& instance, double cpu_budget) {
  LoopResult result;
  std::thread thread([&] {
    result.tid = static_cast<int>(gettid());
    const PaddedBatch batch = OneLongRow();
    result.ok = instance.Execute(batch).ok();  // first call: pins the thread, starts its pools
    cpu_set_t set;
    sched_getaffinity(0, sizeof(set), &set);
    result.instance_thread_affinity = CpuListOf(set);
    result.before = SampleThreads();
    const auto start = std::chrono::steady_clock::now();
    const double start_cpu = result.before[result.tid].cpu_seconds;
    while (result.ok && std::chrono::steady_clock::now() - start < std::chrono::seconds(30)) {
      result.ok = instance.Execute(batch).ok();
      ++result.runs;
      if (SampleThreads()[result.tid].cpu_seconds - start_cpu >= cpu_budget) break;
    }
    result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.after = SampleThreads();
  });
  thread.join();
  return result;
}

std::string Report(const LoopResult& r, double total, double on_instance) {
  std::ostringstream out;
  out << r.runs << " runs in " << r.wall_seconds << " s wall; CPU " << total << " s total, " << on_instance
      << " s on the instance thread " << r.tid << "; per thread:";
  for (const auto& [tid, t] : r.after) {
    auto was = r.before.find(tid);
    const double delta = t.cpu_seconds - (was == r.before.end() ? 0 : was->second.cpu_seconds);
    if (delta > 0) out << " " << tid << "=" << delta << "s[" << t.allowed << "]";
  }
  return out.str();
}

TEST(InstanceThreadsTest, OneIntraOpThreadKeepsTheGraphOnOneThread) {
  std::unique_ptr<ModelConfig> model = LargestBatchOneBucket();
  ASSERT_NE(model, nullptr);
  InstanceGroup group{1, DeviceKind::kCpu, std::nullopt, 1};
  absl::StatusOr<std::unique_ptr<Backend>> instance = Backend::Create({model.get(), group, 0, 1});
  ASSERT_TRUE(instance.ok()) << instance.status();

  const LoopResult r = RunOnInstanceThread(**instance, /*cpu_budget=*/2.0);
  ASSERT_TRUE(r.ok);
  double total = 0;
  for (const auto& [tid, t] : r.after) {
    auto was = r.before.find(tid);
    total += t.cpu_seconds - (was == r.before.end() ? 0 : was->second.cpu_seconds);
  }
  const double on_instance = r.after.at(r.tid).cpu_seconds - r.before.at(r.tid).cpu_seconds;
  const std::string report = Report(r, total, on_instance);
  std::cout << report << "\n";
  ASSERT_GT(total, 1.0) << report;
  // One core: the instance thread holds all the CPU time but for the tick granularity (10 ms per thread; this
  // test samples /proc on the instance thread itself), and the process never used much more than one core's
  // worth of wall time. Without the BLAS cap the pool thread took 15-16 % here under load (0.84-0.85).
  EXPECT_GE(on_instance / total, 0.97) << report;
  EXPECT_LE(total, 1.25 * r.wall_seconds + 0.05) << report;
}

TEST(InstanceThreadsTest, CoresPinTheInstanceThreadAndTheThreadsItStarts) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  const std::string loading_thread_cpus = CpuListOf(allowed);
  if (CPU_COUNT(&allowed) < 2 || !CPU_ISSET(1, &allowed)) GTEST_SKIP() << "needs CPUs 0 and 1";
  std::unique_ptr<ModelConfig> model = LargestBatchOneBucket();
  ASSERT_NE(model, nullptr);
  // Two intra-op threads on one CPU: the OpenMP team the instance thread starts must inherit its pin.
  InstanceGroup group{1, DeviceKind::kCpu, CoreRange{1, 1}, 2};
  absl::StatusOr<std::unique_ptr<Backend>> instance = Backend::Create({model.get(), group, 0, 1});
  ASSERT_TRUE(instance.ok()) << instance.status();
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  EXPECT_EQ(CpuListOf(allowed), loading_thread_cpus) << "loading and warming must leave the loading thread as it was";

  const std::map<int, ThreadTimes> before_instance = SampleThreads();
  const LoopResult r = RunOnInstanceThread(**instance, /*cpu_budget=*/0.5);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.instance_thread_affinity, "1");
  int started = 0;
  for (const auto& [tid, t] : r.after) {
    if (before_instance.count(tid) || tid == r.tid) continue;
    ++started;  // a thread the instance thread started (OpenMP team): pinned like it
    EXPECT_EQ(t.allowed, "1") << "thread " << tid << " started by the instance thread; "
                              << Report(r, 0, 0);
  }
  EXPECT_GE(started, 1) << "with intra_op_threads 2 the instance thread should start an OpenMP team thread";
}

TEST(InstanceThreadsTest, CoresOutsideTheProcessAreRefusedNamingThem) {
  std::unique_ptr<ModelConfig> model = LargestBatchOneBucket();
  ASSERT_NE(model, nullptr);
  InstanceGroup group{1, DeviceKind::kCpu, CoreRange{4000, 4001}, 1};
  absl::StatusOr<std::unique_ptr<Backend>> instance = Backend::Create({model.get(), group, 0, 1});
  ASSERT_FALSE(instance.ok());
  EXPECT_THAT(instance.status().message(), HasSubstr("model asr_ctc instance #0: cores 4000-4001 include CPU 4000, "
                                                     "which this process may not use"));
}

}  // namespace
}  // namespace sluice
