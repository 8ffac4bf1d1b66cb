// How many requests of a traffic sample land in one length bucket, and their real length: a row of --dry-run's
// padding plan (padding_plan.h) and of each of sluice-advisor's candidate plans (advisor/advisor.h), which both
// print and write it (json_writer.h: one writer for both).
// Thread-safety: a plain value.
#pragma once

#include <cstdint>

namespace sluice::loadtest {

struct BucketShare {
  int64_t length = 0;    // the bucket's length; --dry-run: 0 when the request is longer than every bucket (refused)
  int64_t requests = 0;
  double real_steps = 0;  // the requests' lengths, summed
};

}  // namespace sluice::loadtest
