// sluice-bench-backend --json into sluice-advisor --bench-json: the bench times every bucket of a sim model (whose
// latency is base_ms + per_sample_us·B·L), writes them as JSON, and the advisor fits its cost model to that file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "loadtest/advisor/bench_timings.h"
#include "tests/loadtest/advisor_cli.h"

namespace sluice::advisor {
namespace {

using ::testing::HasSubstr;

class BenchJsonRoundTrip : public AdvisorCliTest {};

TEST_F(BenchJsonRoundTrip, TheAdvisorFitsTheBenchesJson) {
  std::filesystem::create_directories(dir_ / "models" / "lin");
  Write("models/lin/config.yaml",
        "name: lin\nkind: generic\n"
        "inputs:\n  - {name: x, dtype: FP32, shape: [-1]}\n"
        "outputs:\n  - {name: y, dtype: FP32, shape: [-1]}\n"
        "buckets: {lengths: [100, 200, 400], batch_sizes: [1, 2]}\n"
        "batching: {max_queue_delay_ms: 0, max_queue_size: 8}\n"
        "instances: [{count: 1, device: sim}]\n"
        "sim: {base_ms: 1, per_sample_us: 2}\n");
  const std::string json = (dir_ / "bench.json").string();
  const std::string log = (dir_ / "bench.log").string();
  const int rc = std::system((std::string(SLUICE_BENCH_BACKEND_BINARY) + " --repository " + (dir_ / "models").string() +
                              " --iterations 3 --json " + json + " > " + log + " 2>&1")
                                 .c_str());
  std::stringstream bench_log;
  bench_log << std::ifstream(log).rdbuf();
  ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << bench_log.str();

  std::stringstream text;
  text << std::ifstream(json).rdbuf();
  rapidjson::Document doc;
  doc.Parse(text.str().c_str());
  ASSERT_FALSE(doc.HasParseError()) << text.str();
  EXPECT_STREQ(doc["schema"].GetString(), "sluice-bench-backend/1");
  ASSERT_EQ(doc["models"].Size(), 1u);
  const rapidjson::Value& model = doc["models"][0];
  EXPECT_STREQ(model["model"].GetString(), "lin");
  EXPECT_TRUE(model["device"].IsString());
  ASSERT_EQ(model["buckets"].Size(), 6u);
  for (const rapidjson::Value& b : model["buckets"].GetArray()) {
    EXPECT_GE(b["p50_ms"].GetDouble(), b["min_ms"].GetDouble());
  }

  // Every timing the reader takes is at least the sim's latency (a sleep is never shorter).
  absl::StatusOr<std::vector<TimingPoint>> points = ReadBenchTimings(json, "lin");
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 6u);
  for (const TimingPoint& p : *points) {
    EXPECT_GE(p.seconds, 0.001 + 2e-6 * p.batch_size * static_cast<double>(p.length)) << p.batch_size << "x" << p.length;
  }

  const std::string lengths = Write("lengths.txt", "90\n100\n180\n390\n400\n");
  std::string output;
  ASSERT_EQ(Run("--lengths-file " + lengths + " --max-buckets 2 --bench-json " + json + " --model lin", &output), 0)
      << output;
  EXPECT_THAT(output, HasSubstr("least squares over 6 timings in " + json));
}

}  // namespace
}  // namespace sluice::advisor
