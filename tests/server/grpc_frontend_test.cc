// The real sluice-server process over loopback, driven by C++ stubs generated from proto/: health, metadata,
// Triton config/statistics, inference on both example models (typed and raw) against the reference outputs,
// and one test per validation class (status code + message), with the server still serving afterwards.
#include <gmock/gmock.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "backend/reference_set.h"
#include "grpc_service.grpc.pb.h"
#include "health.grpc.pb.h"
#include "tests/float_tolerance.h"
#include "tests/server/server_process.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using inference::ModelInferRequest;
using inference::ModelInferResponse;

class GrpcFrontendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new testing::ServerProcess("max_message_bytes: 4194304\n");
    ASSERT_TRUE(server_->ready()) << server_->Log();
    channel_ = grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials());
    stub_ = inference::GRPCInferenceService::NewStub(channel_).release();
  }
  static void TearDownTestSuite() {
    delete stub_;
    channel_.reset();
    delete server_;
  }

  static grpc::Status Infer(const ModelInferRequest& request, ModelInferResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return stub_->ModelInfer(&context, request, response);
  }

  // One row of `tensor` (unbatched [len, ...]) as a request; typed or raw contents.
  static ModelInferRequest RequestFor(const std::string& model, const std::string& name, const HostTensor& tensor,
                                      bool raw, int rows = 1) {
    ModelInferRequest request;
    request.set_model_name(model);
    auto* input = request.add_inputs();
    input->set_name(name);
    input->set_datatype(DataTypeName(tensor.dtype));
    input->add_shape(rows);
    for (int64_t d : tensor.shape) input->add_shape(d);
    std::string bytes;
    for (int r = 0; r < rows; ++r) bytes.append(reinterpret_cast<const char*>(tensor.bytes.data()), tensor.bytes.size());
    if (raw) {
      request.add_raw_input_contents(bytes);
    } else if (tensor.dtype == DataType::kFp32) {
      for (size_t i = 0; i < bytes.size() / 4; ++i) {
        float v;
        std::memcpy(&v, bytes.data() + 4 * i, 4);
        input->mutable_contents()->add_fp32_contents(v);
      }
    } else {
      for (size_t i = 0; i < bytes.size() / 8; ++i) {
        int64_t v;
        std::memcpy(&v, bytes.data() + 8 * i, 8);
        input->mutable_contents()->add_int64_contents(v);
      }
    }
    return request;
  }

  static std::vector<float> OutputValues(const ModelInferResponse& response, int index) {
    if (response.raw_output_contents_size() > 0) {
      const std::string& raw = response.raw_output_contents(index);
      std::vector<float> values(raw.size() / 4);
      std::memcpy(values.data(), raw.data(), raw.size());
      return values;
    }
    const auto& c = response.outputs(index).contents().fp32_contents();
    return {c.begin(), c.end()};
  }

  static void ExpectError(const ModelInferRequest& request, grpc::StatusCode code, const std::string& message) {
    ModelInferResponse response;
    grpc::Status status = Infer(request, &response);
    EXPECT_EQ(status.error_code(), code) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(message));
  }

  static inline testing::ServerProcess* server_ = nullptr;
  static inline std::shared_ptr<grpc::Channel> channel_;
  static inline inference::GRPCInferenceService::Stub* stub_ = nullptr;
};

TEST_F(GrpcFrontendTest, HealthAndMetadata) {
  grpc::ClientContext c1, c2, c3, c4, c5, c6;
  inference::ServerLiveResponse live;
  ASSERT_TRUE(stub_->ServerLive(&c1, {}, &live).ok());
  EXPECT_TRUE(live.live());
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(stub_->ServerReady(&c2, {}, &ready).ok());
  EXPECT_TRUE(ready.ready());
  inference::ModelReadyRequest model_ready;
  model_ready.set_name("asr_ctc");
  inference::ModelReadyResponse model_ready_response;
  ASSERT_TRUE(stub_->ModelReady(&c3, model_ready, &model_ready_response).ok());
  EXPECT_TRUE(model_ready_response.ready());
  inference::ServerMetadataResponse server_metadata;
  ASSERT_TRUE(stub_->ServerMetadata(&c4, {}, &server_metadata).ok());
  EXPECT_EQ(server_metadata.name(), "sluice");
  inference::ModelMetadataRequest metadata_request;
  metadata_request.set_name("asr_ctc");
  inference::ModelMetadataResponse metadata;
  ASSERT_TRUE(stub_->ModelMetadata(&c5, metadata_request, &metadata).ok());
  ASSERT_EQ(metadata.inputs_size(), 1);
  EXPECT_EQ(metadata.inputs(0).name(), "audio");
  EXPECT_EQ(metadata.inputs(0).datatype(), "FP32");
  EXPECT_THAT(std::vector<int64_t>(metadata.inputs(0).shape().begin(), metadata.inputs(0).shape().end()),
              ::testing::ElementsAre(-1, -1));
  EXPECT_THAT(std::vector<int64_t>(metadata.outputs(0).shape().begin(), metadata.outputs(0).shape().end()),
              ::testing::ElementsAre(-1, -1, 29));

  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::health::v1::HealthCheckResponse health_response;
  ASSERT_TRUE(health->Check(&c6, {}, &health_response).ok());
  EXPECT_EQ(health_response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST_F(GrpcFrontendTest, ModelConfigAndStatistics) {
  grpc::ClientContext c1;
  inference::ModelConfigRequest request;
  request.set_name("text_embed");
  inference::ModelConfigResponse config;
  ASSERT_TRUE(stub_->ModelConfig(&c1, request, &config).ok());
  EXPECT_EQ(config.config().max_batch_size(), 8);
  EXPECT_EQ(config.config().input(0).data_type(), inference::TYPE_INT64);
  EXPECT_EQ(config.config().dynamic_batching().max_queue_delay_microseconds(), 5000u);
  EXPECT_EQ(config.config().parameters().at("kind").string_value(), "text");
  EXPECT_EQ(config.config().parameters().at("bucket_lengths").string_value(), "32,64,128,256,512");
  EXPECT_EQ(config.config().parameters().count("sample_rate"), 0u);  // text models have none

  HostTensor ids{DataType::kInt64, {7}, std::vector<std::byte>(56)};
  ModelInferResponse response;
  ASSERT_TRUE(Infer(RequestFor("text_embed", "input_ids", ids, true), &response).ok());
  grpc::ClientContext c2;
  inference::ModelStatisticsRequest stats_request;
  stats_request.set_name("text_embed");
  inference::ModelStatisticsResponse stats;
  ASSERT_TRUE(stub_->ModelStatistics(&c2, stats_request, &stats).ok());
  ASSERT_EQ(stats.model_stats_size(), 1);
  EXPECT_GE(stats.model_stats(0).inference_count(), 1u);
  EXPECT_GE(stats.model_stats(0).inference_stats().success().count(), 1u);
  EXPECT_GE(stats.model_stats(0).batch_stats_size(), 1);
  // Triton's perf_analyzer refuses statistics whose compute input/infer/output counts differ.
  const auto& infer_stats = stats.model_stats(0).inference_stats();
  EXPECT_EQ(infer_stats.compute_input().count(), infer_stats.compute_infer().count());
  EXPECT_EQ(infer_stats.compute_output().count(), infer_stats.compute_infer().count());
  for (const auto& batch : stats.model_stats(0).batch_stats()) {
    EXPECT_EQ(batch.compute_input().count(), batch.compute_infer().count());
    EXPECT_EQ(batch.compute_output().count(), batch.compute_infer().count());
  }
}

TEST_F(GrpcFrontendTest, BothModelsMatchReferenceTypedAndRaw) {
  for (const std::string model : {"asr_ctc", "text_embed"}) {
    absl::StatusOr<std::vector<ReferenceCase>> cases = LoadReferenceSet(std::string(SLUICE_MODELS_DIR) + "/" + model);
    ASSERT_TRUE(cases.ok()) << cases.status();
    const std::string input = model == "asr_ctc" ? "audio" : "input_ids";
    int checked = 0;
    for (size_t k = 0; k < cases->size() && checked < 4; ++k, ++checked) {
      const ReferenceCase& c = (*cases)[k];
      for (bool raw : {false, true}) {
        ModelInferResponse response;
        ModelInferRequest request = RequestFor(model, input, c.inputs[0], raw);
        request.set_id("case" + std::to_string(k));
        grpc::Status status = Infer(request, &response);
        ASSERT_TRUE(status.ok()) << model << " case " << k << ": " << status.error_message();
        EXPECT_EQ(response.id(), request.id());
        EXPECT_EQ(response.raw_output_contents_size() > 0, raw);
        std::vector<float> got = OutputValues(response, 0);
        auto expected = c.outputs[0].values<float>();
        ASSERT_EQ(got.size(), expected.size()) << model << " case " << k;
        float worst = 0;
        for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - expected[i]));
        EXPECT_LE(worst, ::sluice::testing::CrossShapeTolerance(expected))
            << model << " case " << k << (raw ? " raw" : " typed");
        EXPECT_EQ(response.outputs(0).shape(0), 1);
      }
    }
  }
}

TEST_F(GrpcFrontendTest, SeveralRowsOfOneLengthTakeBatchSlots) {
  absl::StatusOr<std::vector<ReferenceCase>> cases = LoadReferenceSet(std::string(SLUICE_MODELS_DIR) + "/text_embed");
  ASSERT_TRUE(cases.ok());
  const ReferenceCase& c = cases->front();
  ModelInferResponse response;
  ASSERT_TRUE(Infer(RequestFor("text_embed", "input_ids", c.inputs[0], true, 3), &response).ok());
  EXPECT_EQ(response.outputs(0).shape(0), 3);
  std::vector<float> got = OutputValues(response, 0);
  auto expected = c.outputs[0].values<float>();
  ASSERT_EQ(got.size(), 3 * expected.size());
  const double tolerance = ::sluice::testing::CrossShapeTolerance(expected);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], expected[i % expected.size()], tolerance);
}

HostTensor Audio(int64_t samples, float value = 0.1f) {
  HostTensor t{DataType::kFp32, {samples}, std::vector<std::byte>(samples * 4)};
  for (float& v : t.values<float>()) v = value;
  return t;
}

TEST_F(GrpcFrontendTest, UnknownModelOrVersion) {
  ExpectError(RequestFor("nope", "audio", Audio(100), true), grpc::StatusCode::NOT_FOUND, "unknown model 'nope'");
  ModelInferRequest request = RequestFor("asr_ctc", "audio", Audio(100), true);
  request.set_model_version("7");
  ExpectError(request, grpc::StatusCode::NOT_FOUND, "model 'asr_ctc' has no version '7'");
}

TEST_F(GrpcFrontendTest, MissingDuplicateExtraInput) {
  ModelInferRequest missing;
  missing.set_model_name("asr_ctc");
  ExpectError(missing, grpc::StatusCode::INVALID_ARGUMENT, "missing input 'audio'");
  ModelInferRequest duplicate = RequestFor("asr_ctc", "audio", Audio(100), true);
  *duplicate.add_inputs() = duplicate.inputs(0);
  duplicate.add_raw_input_contents(duplicate.raw_input_contents(0));
  ExpectError(duplicate, grpc::StatusCode::INVALID_ARGUMENT, "duplicate input 'audio'");
  ExpectError(RequestFor("asr_ctc", "speech", Audio(100), true), grpc::StatusCode::INVALID_ARGUMENT,
              "unexpected input 'speech'");
}

TEST_F(GrpcFrontendTest, WrongDatatype) {
  HostTensor ints{DataType::kInt64, {100}, std::vector<std::byte>(800)};
  ExpectError(RequestFor("asr_ctc", "audio", ints, true), grpc::StatusCode::INVALID_ARGUMENT,
              "input 'audio': datatype INT64 does not match the model's FP32");
}

TEST_F(GrpcFrontendTest, ShapeContradictsDeclaration) {
  HostTensor two_d{DataType::kFp32, {10, 2}, std::vector<std::byte>(80)};
  ExpectError(RequestFor("asr_ctc", "audio", two_d, true), grpc::StatusCode::INVALID_ARGUMENT,
              "input 'audio': shape [1,10,2] does not match the model's [-1,-1]");
}

TEST_F(GrpcFrontendTest, LengthZeroOrOverLargestBucket) {
  ExpectError(RequestFor("asr_ctc", "audio", Audio(256001), true), grpc::StatusCode::INVALID_ARGUMENT,
              "input 'audio': length 256001 exceeds the largest bucket 256000");
  ExpectError(RequestFor("asr_ctc", "audio", Audio(0), true), grpc::StatusCode::INVALID_ARGUMENT,
              "input 'audio': length 0");
}

TEST_F(GrpcFrontendTest, RawByteSizeMismatch) {
  ModelInferRequest request = RequestFor("asr_ctc", "audio", Audio(100), true);
  request.mutable_raw_input_contents(0)->resize(397);
  ExpectError(request, grpc::StatusCode::INVALID_ARGUMENT,
              "input 'audio': 397 bytes of data, but shape [1,100] of FP32 needs 400 bytes");
}

TEST_F(GrpcFrontendTest, NanOrInfInAudio) {
  ExpectError(RequestFor("asr_ctc", "audio", Audio(100, std::numeric_limits<float>::quiet_NaN()), false),
              grpc::StatusCode::INVALID_ARGUMENT, "input 'audio': element 0 is NaN");
  ExpectError(RequestFor("asr_ctc", "audio", Audio(100, std::numeric_limits<float>::infinity()), true),
              grpc::StatusCode::INVALID_ARGUMENT, "input 'audio': element 0 is Inf");
}

TEST_F(GrpcFrontendTest, MessageOverTheLimit) {
  // 8 rows x 160000 samples x 4 bytes = 5 MB > the 4 MiB configured limit.
  ExpectError(RequestFor("asr_ctc", "audio", Audio(160000), true, 8), grpc::StatusCode::RESOURCE_EXHAUSTED,
              "larger than max");
}

TEST_F(GrpcFrontendTest, MalformedProtobufThenStillServing) {
  grpc::GenericStub generic(channel_);
  grpc::ClientContext context;
  const std::string garbage = "\xff\xff\xff\xff\x0f not a protobuf";
  grpc::Slice slice(garbage);
  grpc::ByteBuffer request(&slice, 1), response;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  generic.UnaryCall(&context, "/inference.GRPCInferenceService/ModelInfer", {}, &request, &response,
                    [&](grpc::Status s) {
                      std::lock_guard<std::mutex> lock(mu);
                      status = s;
                      done = true;
                      cv.notify_one();
                    });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  EXPECT_FALSE(status.ok());
  ModelInferResponse ok;
  EXPECT_TRUE(Infer(RequestFor("asr_ctc", "audio", Audio(1600), true), &ok).ok());
}

}  // namespace
}  // namespace sluice
