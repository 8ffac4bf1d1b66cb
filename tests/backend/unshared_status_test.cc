// Unshared (backend/base/unshared_status.h): the copy equals the original (code, message, payloads) and holds its
// own message, so releasing either never touches the other's state.
#include "backend/base/unshared_status.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

TEST(UnsharedStatusTest, EqualsTheOriginalWithItsOwnMessageAndPayloads) {
  absl::Status original = absl::UnavailableError("model m, instance 0: the device is gone");
  original.SetPayload("type.sluice/detail", absl::Cord("retry elsewhere"));
  const absl::Status copy = Unshared(original);
  EXPECT_EQ(copy, original);
  EXPECT_NE(copy.message().data(), original.message().data());  // a plain copy would point at the shared rep's
  original = absl::OkStatus();  // the original's rep released: the copy is unaffected
  EXPECT_EQ(copy.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(copy.message(), "model m, instance 0: the device is gone");
  EXPECT_EQ(copy.GetPayload("type.sluice/detail"), absl::Cord("retry elsewhere"));
  EXPECT_TRUE(Unshared(absl::OkStatus()).ok());
}

}  // namespace
}  // namespace sluice
