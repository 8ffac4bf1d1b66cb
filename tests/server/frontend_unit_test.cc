// The front ends' shared edge, in-process and deterministic: the one parameter parser, input validation and
// output selection, the bearer-token check and the absl::Status <-> HTTP table. Every front end answers through
// these, so each refusal is specified here once, message included.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backend/base/model_config.h"
#include "backend/base/status_mapping.h"
#include "server/kserve/bearer_auth.h"
#include "server/core/infer_parameters.h"
#include "server/core/input_validation.h"
#include "tests/server/model_yaml.h"

namespace sluice {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kTwoTo32Plus1 = (uint64_t{1} << 32) + 1;
constexpr int kPriorityLevels = 3;
const absl::Time kNow = absl::FromUnixSeconds(1'700'000'000);

absl::StatusOr<InferOptions> Parse(InferParameters parameters) {
  return ParseInferParameters(parameters, kPriorityLevels, kNow);
}

// ---------------------------------------------------------------------------------------------------------------
// ParseInferParameters

TEST(InferParametersTest, PriorityTwoToThe32PlusOneIsRefusedNamingTheValueAndTheRange) {
  for (ParameterValue value : {ParameterValue(kTwoTo32Plus1), ParameterValue(static_cast<int64_t>(kTwoTo32Plus1))}) {
    absl::StatusOr<InferOptions> options = Parse({{"priority", value}});
    ASSERT_FALSE(options.ok()) << "value " << ParameterText(value) << " was truncated to " << options->priority;
    EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(options.status().message(),
                AllOf(HasSubstr("'priority'"), HasSubstr("4294967297"), HasSubstr("from 0 to 3")));
  }
}

TEST(InferParametersTest, PriorityFromZeroToTheModelsLevelCountIsAccepted) {
  for (int level = 0; level <= kPriorityLevels; ++level) {
    for (ParameterValue value : {ParameterValue(int64_t{level}), ParameterValue(uint64_t(level))}) {
      absl::StatusOr<InferOptions> options = Parse({{"priority", value}});
      ASSERT_TRUE(options.ok()) << options.status();
      EXPECT_EQ(options->priority, level);
    }
  }
  EXPECT_FALSE(Parse({{"priority", int64_t{kPriorityLevels + 1}}}).ok());
}

TEST(InferParametersTest, TimeoutOfTwoToThe64MinusOneIsRefusedAsOutOfRangeNotAsNegative) {
  absl::StatusOr<InferOptions> options = Parse({{"timeout", std::numeric_limits<uint64_t>::max()}});
  ASSERT_FALSE(options.ok());
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(options.status().message(),
              AllOf(HasSubstr("'timeout'"), HasSubstr("18446744073709551615"),
                    HasSubstr("from 0 to 9223372036854775807"), Not(HasSubstr("negative"))));
}

TEST(InferParametersTest, TimeoutJustPastInt64MaxIsRefusedAndInt64MaxIsAccepted) {
  EXPECT_FALSE(Parse({{"timeout", uint64_t{1} << 63}}).ok());
  absl::StatusOr<InferOptions> top = Parse({{"timeout", std::numeric_limits<int64_t>::max()}});
  ASSERT_TRUE(top.ok()) << top.status();
  EXPECT_EQ(top->deadline, kNow + absl::Microseconds(std::numeric_limits<int64_t>::max()));
}

TEST(InferParametersTest, NegativeTimeoutAndPriorityAreRefusedNamingTheValue) {
  absl::StatusOr<InferOptions> timeout = Parse({{"timeout", int64_t{-5}}});
  ASSERT_FALSE(timeout.ok());
  EXPECT_THAT(timeout.status().message(), AllOf(HasSubstr("'timeout' is -5"), HasSubstr("from 0 to")));
  absl::StatusOr<InferOptions> priority = Parse({{"priority", int64_t{-1}}});
  ASSERT_FALSE(priority.ok());
  EXPECT_THAT(priority.status().message(), AllOf(HasSubstr("'priority' is -1"), HasSubstr("from 0 to 3")));
}

TEST(InferParametersTest, ADoubleIsRefusedAsNotAnInteger) {
  for (const char* key : {"priority", "timeout"}) {
    absl::StatusOr<InferOptions> options = Parse({{key, 1.5}});
    ASSERT_FALSE(options.ok()) << key;
    EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(options.status().message(), AllOf(HasSubstr(key), HasSubstr("1.5"), HasSubstr("must be an integer")));
  }
  EXPECT_FALSE(Parse({{"priority", 2.0}}).ok()) << "a JSON 2.0 is a double, not an integer";
}

TEST(InferParametersTest, AStringOrABooleanIsRefusedAsNotAnInteger) {
  absl::StatusOr<InferOptions> text = Parse({{"priority", std::string("1")}});
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(text.status().message(), AllOf(HasSubstr("must be an integer"), HasSubstr("\"1\"")));
  absl::StatusOr<InferOptions> flag = Parse({{"timeout", true}});
  ASSERT_FALSE(flag.ok());
  EXPECT_THAT(flag.status().message(), AllOf(HasSubstr("must be an integer"), HasSubstr("true")));
}

TEST(InferParametersTest, TimeoutSetsTheDeadlineThatManyMicrosecondsFromNow) {
  absl::StatusOr<InferOptions> options = Parse({{"timeout", int64_t{1500}}});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->deadline, kNow + absl::Microseconds(1500));
  absl::StatusOr<InferOptions> unsigned_options = Parse({{"timeout", uint64_t{250}}});
  ASSERT_TRUE(unsigned_options.ok());
  EXPECT_EQ(unsigned_options->deadline, kNow + absl::Microseconds(250));
}

TEST(InferParametersTest, TimeoutZeroMeansNoDeadline) {
  absl::StatusOr<InferOptions> options = Parse({{"timeout", int64_t{0}}});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->deadline, absl::InfiniteFuture());
}

TEST(InferParametersTest, NoParametersGiveTheDefaults) {
  absl::StatusOr<InferOptions> options = Parse({});
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->priority, 0);
  EXPECT_EQ(options->deadline, absl::InfiniteFuture());
  EXPECT_FALSE(options->binary_data_output.has_value());
}

TEST(InferParametersTest, BinaryDataOutputMustBeABoolean) {
  absl::StatusOr<InferOptions> on = Parse({{"binary_data_output", true}});
  ASSERT_TRUE(on.ok());
  EXPECT_EQ(on->binary_data_output, std::optional<bool>(true));
  absl::StatusOr<InferOptions> off = Parse({{"binary_data_output", false}});
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->binary_data_output, std::optional<bool>(false));
  for (ParameterValue value : {ParameterValue(int64_t{1}), ParameterValue(std::string("true")), ParameterValue(1.0)}) {
    absl::StatusOr<InferOptions> bad = Parse({{"binary_data_output", value}});
    ASSERT_FALSE(bad.ok()) << ParameterText(value);
    EXPECT_THAT(bad.status().message(), AllOf(HasSubstr("'binary_data_output' must be a boolean"),
                                              HasSubstr(ParameterText(value))));
  }
}

TEST(InferParametersTest, UnknownKeysOfAnyTypeAreIgnored) {
  absl::StatusOr<InferOptions> options =
      Parse({{"sequence_id", std::numeric_limits<uint64_t>::max()}, {"custom", std::string("x")},
             {"ratio", -2.5}, {"flag", false}, {"priority", int64_t{1}}, {"Priority", int64_t{99}}});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->priority, 1);
}

TEST(InferParametersTest, ParameterTextWritesEachTypeAsItWouldBeTyped) {
  EXPECT_EQ(ParameterText(kTwoTo32Plus1), "4294967297");
  EXPECT_EQ(ParameterText(int64_t{-7}), "-7");
  EXPECT_EQ(ParameterText(true), "true");
  EXPECT_EQ(ParameterText(std::string("abc")), "\"abc\"");
  EXPECT_EQ(ParameterText(1.5), "1.5");
}

// ---------------------------------------------------------------------------------------------------------------
// ValidateInputs / SelectOutputs

// Wire tensors whose bytes live in the builder (as a codec's storage would hold them).
// Moved, never copied: a copy's views would still point into the original's storage.
class WireRequest {
 public:
  WireRequest() = default;
  WireRequest(WireRequest&&) = default;
  WireRequest(const WireRequest&) = delete;
  WireRequest& operator=(const WireRequest&) = delete;
  template <typename T>
  WireRequest& Add(std::string name, std::string datatype, std::vector<int64_t> shape, const std::vector<T>& values) {
    std::string bytes(values.size() * sizeof(T), '\0');
    if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
    return AddBytes(std::move(name), std::move(datatype), std::move(shape), std::move(bytes));
  }
  WireRequest& AddBytes(std::string name, std::string datatype, std::vector<int64_t> shape, std::string bytes) {
    tensors_.push_back({std::move(name), std::move(datatype), std::move(shape), storage_.emplace_back(std::move(bytes))});
    return *this;
  }
  // A valid tagger request: `rows` x `length`, token t of row r = 10 * r + t, features 0.5.
  static WireRequest Tagger(int64_t rows, int64_t length) {
    std::vector<int64_t> tokens;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t t = 0; t < length; ++t) tokens.push_back(10 * r + t);
    }
    WireRequest request;
    request.Add<int64_t>("tokens", "INT64", {rows, length}, tokens);
    request.Add<float>("features", "FP32", {rows, length, 3}, std::vector<float>(rows * length * 3, 0.5f));
    return request;
  }
  std::vector<WireTensor>& tensors() { return tensors_; }

 private:
  std::deque<std::string> storage_;
  std::vector<WireTensor> tensors_;
};

class InputValidationTest : public ::testing::Test {
 protected:
  absl::Status Validate(WireRequest& request) { return ValidateInputs(model_, request.tensors()).status(); }
  // The tagger request with its input `name` replaced.
  template <typename T>
  absl::Status ValidateWith(const std::string& name, const std::string& datatype, std::vector<int64_t> shape,
                            const std::vector<T>& values) {
    WireRequest request = WireRequest::Tagger(1, 3);
    WireRequest replacement;
    replacement.Add<T>(name, datatype, std::move(shape), values);
    for (WireTensor& tensor : request.tensors()) {
      if (tensor.name == name) tensor = replacement.tensors()[0];
    }
    return ValidateInputs(model_, request.tensors()).status();
  }

  ModelConfig model_ = testing::TaggerModel();
};

TEST_F(InputValidationTest, AValidRequestIsSplitIntoRowsOfItsLength) {
  WireRequest request = WireRequest::Tagger(2, 3);
  absl::StatusOr<ValidatedRequest> validated = ValidateInputs(model_, request.tensors());
  ASSERT_TRUE(validated.ok()) << validated.status();
  EXPECT_EQ(validated->rows, 2);
  EXPECT_EQ(validated->length, 3);
  ASSERT_EQ(validated->row_inputs.size(), 2u);
  ASSERT_EQ(validated->row_inputs[1].size(), 2u);  // in declaration order
  const HostTensor& tokens = validated->row_inputs[1][0];
  EXPECT_EQ(tokens.dtype, DataType::kInt64);
  EXPECT_THAT(tokens.shape, ElementsAre(3));
  EXPECT_THAT(tokens.values<int64_t>(), ElementsAre(10, 11, 12));
  EXPECT_THAT(validated->row_inputs[1][1].shape, ElementsAre(3, 3));
}

TEST_F(InputValidationTest, InputsInAnyOrderAreMatchedByName) {
  WireRequest request = WireRequest::Tagger(1, 2);
  std::swap(request.tensors()[0], request.tensors()[1]);
  absl::StatusOr<ValidatedRequest> validated = ValidateInputs(model_, request.tensors());
  ASSERT_TRUE(validated.ok()) << validated.status();
  EXPECT_EQ(validated->row_inputs[0][0].dtype, DataType::kInt64);
}

TEST_F(InputValidationTest, AnUnknownDatatypeIsNamedAsUnknown) {
  absl::Status status = ValidateWith<float>("features", "FP99", {1, 3, 3}, std::vector<float>(9, 0.f));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("input 'features'"), HasSubstr("unknown datatype 'FP99'"),
                                      HasSubstr("FP32")));
}

TEST_F(InputValidationTest, AKnownDatatypeOtherThanTheModelsIsAMismatch) {
  absl::Status status = ValidateWith<float>("features", "BYTES", {1, 3, 3}, std::vector<float>(9, 0.f));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 'features': datatype BYTES does not match the model's FP32"));
  EXPECT_THAT(status.message(), Not(HasSubstr("unknown")));
}

struct OutOfRangeCase {
  int64_t value;
  const char* text;
};

TEST_F(InputValidationTest, TokenIdsOutsideTheDeclaredRangeAreRefusedNamingElementAndRange) {
  for (OutOfRangeCase c : {OutOfRangeCase{-1, "-1"}, OutOfRangeCase{1000, "1000"},
                           OutOfRangeCase{std::numeric_limits<int64_t>::max(), "9223372036854775807"},
                           OutOfRangeCase{std::numeric_limits<int64_t>::min(), "-9223372036854775808"}}) {
    absl::Status status = ValidateWith<int64_t>("tokens", "INT64", {1, 3}, {0, 999, c.value});
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(status.message(),
                HasSubstr(std::string("input 'tokens': element 2 is ") + c.text + ", outside the model's range [0, 999]"));
  }
  EXPECT_TRUE(ValidateWith<int64_t>("tokens", "INT64", {1, 3}, {0, 999, 500}).ok()) << "both bounds are inclusive";
}

TEST_F(InputValidationTest, Int32TokenIdsAreCheckedAgainstTheirRangeToo) {
  ModelConfig model = testing::ParseModelYaml(R"(name: ids32
kind: text
inputs: [{name: ids, dtype: INT32, shape: [-1], range: [1, 50]}]
outputs: [{name: out, dtype: FP32, shape: [-1]}]
buckets: {lengths: [4], batch_sizes: [1]}
instances: [{device: cpu}]
)");
  WireRequest bad;
  bad.Add<int32_t>("ids", "INT32", {1, 2}, {1, 0});
  absl::Status status = ValidateInputs(model, bad.tensors()).status();
  EXPECT_THAT(status.message(), HasSubstr("input 'ids': element 1 is 0, outside the model's range [1, 50]"));
  WireRequest good;
  good.Add<int32_t>("ids", "INT32", {1, 2}, {1, 50});
  EXPECT_TRUE(ValidateInputs(model, good.tensors()).ok());
}

TEST_F(InputValidationTest, NanAndInfAreRefusedNamingTheElement) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> features(9, 0.25f);
  features[4] = nan;
  absl::Status status = ValidateWith<float>("features", "FP32", {1, 3, 3}, features);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 'features': element 4 is NaN"));
  features[4] = 0.f;
  features[8] = -inf;
  EXPECT_THAT(ValidateWith<float>("features", "FP32", {1, 3, 3}, features).message(),
              HasSubstr("element 8 is Inf"));
}

TEST_F(InputValidationTest, AShapeOtherThanTheDeclaredOneIsRefusedShowingBoth) {
  absl::Status status = ValidateWith<float>("features", "FP32", {1, 3, 2}, std::vector<float>(6, 0.f));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 'features': shape [1,3,2] does not match the model's [-1,-1,3]"));
  EXPECT_THAT(ValidateWith<float>("features", "FP32", {3, 3}, std::vector<float>(9, 0.f)).message(),
              HasSubstr("shape [3,3] does not match"));
  EXPECT_THAT(ValidateWith<int64_t>("tokens", "INT64", {1, -3}, {}).message(), HasSubstr("shape [1,-3] does not match"));
}

TEST_F(InputValidationTest, ByteSizeMustEqualShapeTimesDatatypeSize) {
  absl::Status status = ValidateWith<int64_t>("tokens", "INT64", {1, 3}, {1, 2});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 'tokens': 16 bytes of data, but shape [1,3] of INT64 needs 24 bytes"));
  EXPECT_THAT(ValidateWith<int64_t>("tokens", "INT64", {1, 3}, {1, 2, 3, 4}).message(),
              HasSubstr("32 bytes of data"));
}

TEST_F(InputValidationTest, RowsOverTheMaxBatchSizeAreRefused) {
  WireRequest request = WireRequest::Tagger(5, 2);
  absl::Status status = Validate(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("5 rows exceed the model's max batch size 4"));
  WireRequest four = WireRequest::Tagger(4, 2);
  EXPECT_TRUE(Validate(four).ok());
}

TEST_F(InputValidationTest, ZeroRowsZeroLengthAndLengthOverTheLargestBucketAreRefused) {
  WireRequest no_rows;
  no_rows.Add<int64_t>("tokens", "INT64", {0, 3}, {}).Add<float>("features", "FP32", {0, 3, 3}, {});
  EXPECT_THAT(Validate(no_rows).message(), HasSubstr("batch dimension is 0"));
  WireRequest empty;
  empty.Add<int64_t>("tokens", "INT64", {1, 0}, {}).Add<float>("features", "FP32", {1, 0, 3}, {});
  EXPECT_THAT(Validate(empty).message(), HasSubstr("length 0; at least 1 step is needed"));
  WireRequest too_long = WireRequest::Tagger(1, 9);
  EXPECT_THAT(Validate(too_long).message(), HasSubstr("length 9 exceeds the largest bucket 8"));
  WireRequest longest = WireRequest::Tagger(1, 8);
  EXPECT_TRUE(Validate(longest).ok());
}

TEST_F(InputValidationTest, MissingExtraAndDuplicateInputsAreRefusedByName) {
  WireRequest missing;
  missing.Add<int64_t>("tokens", "INT64", {1, 1}, {1});
  EXPECT_THAT(Validate(missing).message(), HasSubstr("missing input 'features' for model 'tagger'"));
  WireRequest extra = WireRequest::Tagger(1, 1);
  extra.Add<int64_t>("mask", "INT64", {1, 1}, {1});
  EXPECT_THAT(Validate(extra).message(),
              AllOf(HasSubstr("unexpected input 'mask'"), HasSubstr("inputs: tokens, features")));
  WireRequest twice = WireRequest::Tagger(1, 1);
  twice.Add<int64_t>("tokens", "INT64", {1, 1}, {1});
  EXPECT_THAT(Validate(twice).message(), HasSubstr("duplicate input 'tokens'"));
}

TEST_F(InputValidationTest, InputsThatDisagreeOnRowsOrLengthAreRefused) {
  WireRequest rows;
  rows.Add<int64_t>("tokens", "INT64", {2, 2}, {1, 2, 3, 4})
      .Add<float>("features", "FP32", {1, 2, 3}, std::vector<float>(6, 0.f));
  EXPECT_THAT(Validate(rows).message(), HasSubstr("disagrees with the other inputs' rows/length"));
  WireRequest length;
  length.Add<int64_t>("tokens", "INT64", {1, 2}, {1, 2}).Add<float>("features", "FP32", {1, 3, 3}, std::vector<float>(9, 0.f));
  EXPECT_THAT(Validate(length).message(), HasSubstr("disagrees with the other inputs' rows/length"));
}

TEST_F(InputValidationTest, NoRequestedOutputsSelectsEveryOutputInDeclarationOrder) {
  absl::StatusOr<std::vector<size_t>> selected = SelectOutputs(model_, {});
  ASSERT_TRUE(selected.ok());
  EXPECT_THAT(*selected, ElementsAre(0, 1));
}

TEST_F(InputValidationTest, RequestedOutputsKeepTheRequestsOrder) {
  const std::vector<std::string> names = {"score", "logits"};
  absl::StatusOr<std::vector<size_t>> selected = SelectOutputs(model_, names);
  ASSERT_TRUE(selected.ok()) << selected.status();
  EXPECT_THAT(*selected, ElementsAre(1, 0));
}

TEST_F(InputValidationTest, UnknownOrRepeatedOutputsAreRefused) {
  const std::vector<std::string> unknown = {"logits", "nope"};
  absl::Status status = SelectOutputs(model_, unknown).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("unknown output 'nope' for model 'tagger'"));
  const std::vector<std::string> repeated = {"score", "logits", "score"};
  EXPECT_THAT(SelectOutputs(model_, repeated).status().message(), HasSubstr("output 'score' requested twice"));
}

TEST_F(InputValidationTest, BatchedShapePutsAVariableBatchDimensionFirst) {
  EXPECT_THAT(BatchedShape(model_.inputs[1]), ElementsAre(-1, -1, 3));
  EXPECT_THAT(BatchedShape(model_.outputs[1]), ElementsAre(-1, 2));
}

// ---------------------------------------------------------------------------------------------------------------
// CheckBearer

TEST(BearerAuthTest, TheSchemeNameIsCaseInsensitive) {
  for (const char* header : {"Bearer tok", "bearer tok", "BEARER tok", "bEaReR tok", "  Bearer   tok  "}) {
    EXPECT_TRUE(CheckBearer(std::string_view(header), "tok").ok()) << header;
  }
}

TEST(BearerAuthTest, MissingMalformedAndWrongTokensAreRefusedWithDistinctMessages) {
  const absl::Status missing = CheckBearer(std::nullopt, "tok");
  const absl::Status basic = CheckBearer(std::string_view("Basic x"), "tok");
  const absl::Status wrong = CheckBearer(std::string_view("Bearer other"), "tok");
  for (const absl::Status& status : {missing, basic, wrong}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated) << status;
  }
  EXPECT_THAT(missing.message(), HasSubstr("missing"));
  EXPECT_THAT(basic.message(), HasSubstr("not of the form 'Bearer <token>'"));
  EXPECT_THAT(wrong.message(), HasSubstr("invalid bearer token"));
  EXPECT_NE(missing.message(), basic.message());
  EXPECT_NE(basic.message(), wrong.message());
  EXPECT_NE(missing.message(), wrong.message());
}

TEST(BearerAuthTest, ATokenThatOnlySharesAPrefixOrIsEmptyIsRefused) {
  for (const char* header : {"Bearer to", "Bearer tokk", "Bearer TOK", "Bearer ", "Bearer", "Bearertok", ""}) {
    EXPECT_FALSE(CheckBearer(std::string_view(header), "tok").ok()) << "'" << header << "'";
  }
}

TEST(BearerAuthTest, AnEmptyConfiguredTokenMeansNoCheck) {
  EXPECT_TRUE(CheckBearer(std::nullopt, "").ok());
  EXPECT_TRUE(CheckBearer(std::string_view("Basic x"), "").ok());
  EXPECT_TRUE(CheckBearer(std::string_view("Bearer anything"), "").ok());
}

// ---------------------------------------------------------------------------------------------------------------
// The absl::Status <-> HTTP table

TEST(StatusMappingTest, EveryMappedCodeRoundTripsThroughItsHttpStatus) {
  struct Row {
    absl::StatusCode code;
    int http;
  };
  for (Row row : {Row{absl::StatusCode::kOk, 200}, Row{absl::StatusCode::kInvalidArgument, 400},
                  Row{absl::StatusCode::kUnauthenticated, 401}, Row{absl::StatusCode::kPermissionDenied, 403},
                  Row{absl::StatusCode::kNotFound, 404}, Row{absl::StatusCode::kOutOfRange, 413},
                  Row{absl::StatusCode::kResourceExhausted, 429}, Row{absl::StatusCode::kCancelled, 499},
                  Row{absl::StatusCode::kInternal, 500}, Row{absl::StatusCode::kUnimplemented, 501},
                  Row{absl::StatusCode::kUnavailable, 503}, Row{absl::StatusCode::kDeadlineExceeded, 504}}) {
    EXPECT_EQ(HttpStatusFor(row.code), row.http) << absl::StatusCodeToString(row.code);
    EXPECT_EQ(StatusCodeForHttp(row.http), row.code) << row.http;
    EXPECT_EQ(StatusCodeForHttp(HttpStatusFor(row.code)), row.code) << absl::StatusCodeToString(row.code);
  }
  EXPECT_EQ(HttpStatusFor(absl::ResourceExhaustedError("full")), 429);
}

TEST(StatusMappingTest, RequestTimeoutAndHeaderTooLargeMapToDeadlineAndOutOfRange) {
  EXPECT_EQ(StatusCodeForHttp(408), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(StatusCodeForHttp(431), absl::StatusCode::kOutOfRange);
}

TEST(StatusMappingTest, UnmappedCodesAnswer500AndUnmappedStatusesFallBackByClass) {
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kAborted), 500);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kDataLoss), 500);
  EXPECT_EQ(StatusCodeForHttp(418), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(StatusCodeForHttp(502), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace sluice
