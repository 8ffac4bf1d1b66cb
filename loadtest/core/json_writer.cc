#include "loadtest/core/json_writer.h"

namespace sluice::loadtest {

void WriteBucketShares(JsonWriter& w, const std::vector<BucketShare>& buckets) {
  w.StartArray();
  for (const BucketShare& b : buckets) {
    w.StartObject();
    w.Key("length");
    w.Int64(b.length);
    w.Key("requests");
    w.Int64(b.requests);
    w.Key("real_steps");
    w.Double(b.real_steps);
    w.EndObject();
  }
  w.EndArray();
}

}  // namespace sluice::loadtest
