// Triton's ModelStreamInfer (decoupled, bidirectional gRPC streaming) for text-generation models, as Triton's
// vLLM / TensorRT-LLM backends serve it: every ModelInferRequest read from the stream is decoded
// (triton_stream_codec.h) and handed to GenerationModel::Generate — the one generation request path — with a sink
// that queues its responses onto the stream. Several requests may be in flight on one stream; their responses
// interleave, each echoing its request id. stream = true: a response per text delta, then a final one (no outputs
// with triton_enable_empty_final_response, otherwise an empty text_output), each carrying triton_final_response;
// stream = false: one final response with the whole text. A refused or failed request gets a response with
// error_message; the stream goes on. The client's half-close ends the stream once every request has finished; a
// cancelled or broken stream cancels its requests (their KV slots are freed at once).
// Writes: one in flight at a time; while one is in flight, a request's queued text is merged into one response,
// so the queue holds at most a few responses per request whatever the client's reading speed. Refusals are never
// merged, so a client that sends requests without reading the answers would grow the queue without bound: once
// more than kTritonStreamMaxQueuedResponses responses wait, the stream is ended with RESOURCE_EXHAUSTED (its
// running requests cancelled, the queue dropped, no further request read) rather than refusing new requests, which
// would each queue one more response.
// Thread-safety: the reactor's state is guarded by its mutex; gRPC reactions and sink callbacks (engine threads)
// take it briefly and never call Generate's handles, StartWrite or Finish while holding it.
#pragma once

#include <string>

#include <grpcpp/grpcpp.h>

#include "grpc_service.pb.h"
#include "server/hub/model_hub.h"

namespace sluice {

inline constexpr size_t kTritonStreamMaxQueuedResponses = 1024;

using TritonStreamReactor = grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>;

// A new stream's reactor (deletes itself when gRPC is done with it). A non-OK `auth` (the bearer check's result)
// finishes the stream with it at once. REQUIRES: `hub` outlives the stream.
TritonStreamReactor* StartTritonStream(ModelHub* hub, const grpc::Status& auth);

}  // namespace sluice
