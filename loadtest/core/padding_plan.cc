#include "loadtest/core/padding_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "loadtest/core/json_writer.h"
#include "loadtest/core/text_file.h"

namespace sluice::loadtest {

std::vector<ModelPaddingPlan> PlanPadding(const Workload& workload, uint64_t first_index, int64_t requests) {
  std::vector<ModelPaddingPlan> plans;
  for (const WorkloadModel& m : workload.models()) {
    ModelPaddingPlan plan;
    plan.model = m.info.name;
    std::vector<int64_t> lengths = m.info.bucket_lengths;
    if (lengths.empty()) lengths.push_back(m.info.max_length);
    plan.max_bucket = lengths.back();
    for (int64_t length : lengths) plan.buckets.push_back({length, 0, 0});
    plans.push_back(std::move(plan));
  }
  for (int64_t i = 0; i < requests; ++i) {
    const PlannedRequest drawn = workload.Draw(first_index + static_cast<uint64_t>(i));
    ModelPaddingPlan& plan = plans[drawn.model];
    auto bucket = std::find_if(plan.buckets.begin(), plan.buckets.end(),
                               [&](const BucketShare& b) { return b.length >= drawn.length; });
    if (bucket == plan.buckets.end()) {  // longer than every bucket: the server refuses it; listed apart
      if (plan.buckets.front().length != 0) plan.buckets.insert(plan.buckets.begin(), BucketShare{0, 0, 0});
      bucket = plan.buckets.begin();
    }
    ++bucket->requests;
    bucket->real_steps += static_cast<double>(drawn.length);
    if (bucket->length == 0) continue;
    ++plan.requests;
    plan.real_steps += static_cast<double>(drawn.length);
    plan.bucket_steps += static_cast<double>(bucket->length);
    plan.audio_seconds += workload.models()[drawn.model].info.AudioSeconds(drawn.length);
  }
  return plans;
}

std::string FormatPaddingPlan(const std::vector<ModelPaddingPlan>& plans) {
  std::string out;
  for (const ModelPaddingPlan& p : plans) {
    absl::StrAppend(&out, absl::StrFormat("dry run %s: %d requests, real %.0f steps%s\n", p.model, p.requests,
                                          p.real_steps,
                                          p.audio_seconds > 0 ? absl::StrFormat(" (%.1f audio-s)", p.audio_seconds)
                                                              : std::string()));
    absl::StrAppend(&out, absl::StrFormat("  %10s %9s %7s %14s %10s\n", "bucket", "requests", "share", "mean length",
                                          "fill"));
    for (const BucketShare& b : p.buckets) {
      const double mean = b.requests > 0 ? b.real_steps / b.requests : 0;
      absl::StrAppend(&out, absl::StrFormat("  %10s %9d %6.1f%% %14.0f %9.1f%%\n",
                                            b.length == 0 ? "too long" : absl::StrCat(b.length), b.requests,
                                            p.requests > 0 ? 100.0 * b.requests / p.requests : 0.0, mean,
                                            b.length > 0 ? 100.0 * mean / b.length : 0.0));
    }
    absl::StrAppend(&out, absl::StrFormat("  padding efficiency (real / padded steps): buckets %.1f %%, pad-to-max "
                                          "(%d) %.1f %%, %.2fx less compute with buckets\n",
                                          100 * p.efficiency(), p.max_bucket, 100 * p.pad_to_max_efficiency(),
                                          p.pad_to_max_efficiency() > 0 ? p.efficiency() / p.pad_to_max_efficiency()
                                                                        : 0.0));
  }
  absl::StrAppend(&out, "  (row padding only; dummy rows filling partial batches are on the server's /metrics)\n");
  return out;
}

std::string PaddingPlanToJson(const std::vector<ModelPaddingPlan>& plans, uint64_t seed) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("schema");
  w.String("sluice-loadtest-plan/1");
  w.Key("seed");
  w.Uint64(seed);
  w.Key("models");
  w.StartArray();
  for (const ModelPaddingPlan& p : plans) {
    w.StartObject();
    w.Key("model");
    w.String(p.model.c_str());
    w.Key("requests");
    w.Int64(p.requests);
    w.Key("real_steps");
    w.Double(p.real_steps);
    w.Key("bucket_steps");
    w.Double(p.bucket_steps);
    w.Key("max_bucket");
    w.Int64(p.max_bucket);
    w.Key("audio_seconds");
    w.Double(p.audio_seconds);
    w.Key("efficiency");
    w.Double(p.efficiency());
    w.Key("pad_to_max_efficiency");
    w.Double(p.pad_to_max_efficiency());
    w.Key("buckets");
    WriteBucketShares(w, p.buckets);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return buffer.GetString();
}

absl::Status WritePaddingPlanJson(const std::vector<ModelPaddingPlan>& plans, uint64_t seed,
                                  const std::string& path) {
  return WriteTextFile(path, PaddingPlanToJson(plans, seed) + "\n");
}

}  // namespace sluice::loadtest
