// What the JSON documents of sluice-loadtest (--json, the --dry-run plan) and sluice-advisor (--json) share: one
// writer type (RapidJSON, pretty-printed) and the per-bucket rows both write. Files: text_file.h.
// Include from .cc files of libraries built with RapidJSON's include directory (sluice_loadtest, sluice_advisor).
// Thread-safety: pure functions.
#pragma once

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <vector>

#include "loadtest/core/bucket_share.h"

namespace sluice::loadtest {

using JsonWriter = rapidjson::PrettyWriter<rapidjson::StringBuffer>;

// [{"length", "requests", "real_steps"}, ...]: one object per bucket, in order.
void WriteBucketShares(JsonWriter& w, const std::vector<BucketShare>& buckets);

}  // namespace sluice::loadtest
