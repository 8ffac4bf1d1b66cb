#include "loadtest/advisor/advisor_report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "loadtest/core/json_writer.h"
#include "loadtest/core/text_file.h"

namespace sluice::advisor {
namespace {

std::string Seconds(const Advice& a, double steps) {
  return a.input.sample_rate ? absl::StrFormat("%.2f s", steps / *a.input.sample_rate) : std::string("-");
}

std::string FillTable(const Advice& a, const PlanRow& p) {
  std::string out = absl::StrFormat("  %10s %9s %9s %7s %14s %7s\n", "bucket", "seconds", "requests", "share",
                                    "mean length", "fill");
  for (const loadtest::BucketShare& b : p.buckets) {
    const double mean = b.requests > 0 ? b.real_steps / b.requests : 0;
    absl::StrAppend(&out, absl::StrFormat("  %10d %9s %9d %6.1f%% %14.0f %6.1f%%\n", b.length,
                                          Seconds(a, static_cast<double>(b.length)), b.requests,
                                          a.requests > 0 ? 100.0 * b.requests / a.requests : 0.0, mean,
                                          100.0 * mean / static_cast<double>(b.length)));
  }
  return out;
}

void WriteInt64Array(loadtest::JsonWriter& w, const std::vector<int64_t>& v) {
  w.StartArray();
  for (int64_t x : v) w.Int64(x);
  w.EndArray();
}

}  // namespace

std::string FormatAdvice(const Advice& a) {
  const AdvisorInput& in = a.input;
  std::string out = absl::StrFormat("sluice-advisor: %d requests, lengths up to %d steps%s; %d distinct%s, %d "
                                    "candidate bucket lengths%s\n",
                                    a.requests, a.max_length,
                                    in.sample_rate ? absl::StrCat(" (", Seconds(a, a.max_length), " at ",
                                                                  *in.sample_rate, " Hz)")
                                                   : std::string(),
                                    a.distinct_lengths,
                                    in.multiple_of > 1 ? absl::StrCat(" after rounding up to multiples of ",
                                                                      in.multiple_of)
                                                       : std::string(),
                                    a.candidates, a.candidates_merged ? " (quantile-merged)" : "");
  if (!in.lengths_source.empty()) absl::StrAppend(&out, "  lengths: ", in.lengths_source, "\n");
  absl::StrAppend(&out, absl::StrFormat("  cost: %s (%s), B = %d; budget %d lengths%s\n", in.cost.ToString(),
                                        in.cost_source, in.batch_size, in.max_buckets,
                                        in.per_bucket_penalty > 0
                                            ? absl::StrFormat(", %.3g ms per request per bucket",
                                                              in.per_bucket_penalty * 1000)
                                            : std::string()));
  absl::StrAppend(&out, "\nadvised (least expected compute per request):\n  ", a.ConfigLine(), "\n\n");
  absl::StrAppend(&out, FillTable(a, a.plans.front()));
  absl::StrAppend(&out, absl::StrFormat("\n  %-20s %7s %6s %9s %12s %14s %10s %8s\n", "plan", "lengths", "graphs",
                                        "padding", "ms/request", "req/s/instance", "compute", "refused"));
  const double advised = a.plans.front().seconds_per_request;
  for (const PlanRow& p : a.plans) {
    absl::StrAppend(&out, absl::StrFormat("  %-20s %7d %6d %8.1f%% %12.3f %14.2f %9.2fx %8d\n", p.name,
                                          p.lengths.size(), p.graphs, 100 * p.efficiency(),
                                          1000 * p.seconds_per_request, p.throughput_rps(),
                                          advised > 0 ? p.seconds_per_request / advised : 0.0, p.refused));
  }
  for (const PlanRow& p : a.plans) {
    absl::StrAppend(&out, absl::StrFormat("  %-20s [%s]\n", p.name, absl::StrJoin(p.lengths, ", ")));
  }
  absl::StrAppend(&out, "  (padding = real / padded steps; ms/request = time(B, bucket) / B averaged over the served "
                        "requests, full batches; compute relative to advised; row padding only)\n");
  for (const std::string& note : a.notes) absl::StrAppend(&out, "note: ", note, "\n");
  // The graphs are compiled per bucket: advice takes effect only once they are exported at the new lengths.
  const std::string model = in.model_name.empty() ? std::string("MODEL") : in.model_name;
  absl::StrAppend(&out, "\nto apply: export the model's graphs at the advised lengths into a new repository and "
                        "point the server config's model_repository at it, e.g. for an example model:\n",
                  "  /usr/bin/python3 backend/compile/export_models.py --out NEW_REPO --models ", model,
                  " --lengths ", absl::StrJoin(a.bucket_lengths, ","), "\n",
                  "  (export_models.py writes the new buckets into config.yaml; your own model: trace its graphs at these "
                  "lengths, backend/compile/README.md, and set buckets.lengths to match)\n");
  return out;
}

namespace {

using Writer = loadtest::JsonWriter;

// What the advice was computed from: the observed lengths, the batch sizes, the limits and the cost model.
void WriteAdviceInputs(Writer& w, const Advice& a) {
  const AdvisorInput& in = a.input;
  w.Key("requests");
  w.Int64(a.requests);
  w.Key("lengths_source");
  w.String(in.lengths_source.c_str());
  w.Key("max_length");
  w.Int64(a.max_length);
  w.Key("distinct_lengths");
  w.Int64(a.distinct_lengths);
  w.Key("candidates");
  w.Int64(a.candidates);
  w.Key("candidates_merged");
  w.Bool(a.candidates_merged);
  w.Key("multiple_of");
  w.Int64(in.multiple_of);
  w.Key("batch_size");
  w.Int(in.batch_size);
  w.Key("batch_sizes");
  w.StartArray();
  for (int b : in.batch_sizes) w.Int(b);
  w.EndArray();
  w.Key("max_buckets");
  w.Int(in.max_buckets);
  w.Key("per_bucket_penalty_s");
  w.Double(in.per_bucket_penalty);
  w.Key("sample_rate");
  if (in.sample_rate) {
    w.Int(*in.sample_rate);
  } else {
    w.Null();
  }
  w.Key("cost_model");
  w.StartObject();
  w.Key("a");
  w.Double(in.cost.a);
  w.Key("b");
  w.Double(in.cost.b);
  w.Key("c");
  w.Double(in.cost.c);
  w.Key("source");
  w.String(in.cost_source.c_str());
  w.EndObject();
}

// One plan's figures; `advised`: the advised plan's seconds per request (0: none).
void WritePlan(Writer& w, const PlanRow& p, double advised) {
  w.StartObject();
  w.Key("name");
  w.String(p.name.c_str());
  w.Key("lengths");
  WriteInt64Array(w, p.lengths);
  w.Key("buckets");
  w.Int64(static_cast<int64_t>(p.lengths.size()));
  w.Key("graphs");
  w.Int(p.graphs);
  w.Key("requests");
  w.Int64(p.requests);
  w.Key("refused");
  w.Int64(p.refused);
  w.Key("real_steps");
  w.Double(p.real_steps);
  w.Key("padded_steps");
  w.Double(p.padded_steps);
  w.Key("padding_efficiency");
  w.Double(p.efficiency());
  w.Key("seconds_per_request");
  w.Double(p.seconds_per_request);
  w.Key("throughput_rps");
  w.Double(p.throughput_rps());
  w.Key("vs_advised_compute");
  w.Double(advised > 0 ? p.seconds_per_request / advised : 0.0);
  w.Key("per_bucket");
  loadtest::WriteBucketShares(w, p.buckets);
  w.EndObject();
}

}  // namespace

std::string AdviceToJson(const Advice& a) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("schema");
  w.String("sluice-advisor/1");
  WriteAdviceInputs(w, a);
  w.Key("bucket_lengths");
  WriteInt64Array(w, a.bucket_lengths);
  w.Key("config_line");
  w.String(a.ConfigLine().c_str());
  w.Key("plans");
  w.StartArray();
  const double advised = a.plans.front().seconds_per_request;
  for (const PlanRow& p : a.plans) WritePlan(w, p, advised);
  w.EndArray();
  w.Key("notes");
  w.StartArray();
  for (const std::string& note : a.notes) w.String(note.c_str());
  w.EndArray();
  w.EndObject();
  return buffer.GetString();
}

absl::Status WriteAdviceJson(const Advice& advice, const std::string& path) {
  return loadtest::WriteTextFile(path, AdviceToJson(advice) + "\n");
}

}  // namespace sluice::advisor
