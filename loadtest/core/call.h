// The load generator's own description of one call and of how it ended, whatever API carries it. The runner
// (runner.h) builds a Call from the workload (workload.h) and hands it to a LoadClient (load_client.h); each API's
// client turns it into its wire request (KServe protobufs in kserve/, Riva's Recognize in speech/, streamed
// generations in generation/) and its answer into an Outcome. Nothing here names a wire format.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace sluice::loadtest {

// One tensor of a call or of its answer: its raw bytes in row-major order (BYTES: the raw text of one element).
struct CallTensor {
  std::string name;
  std::string datatype;  // KServe datatype string: FP32, INT64, INT32, BYTES, FP64, ...
  std::vector<int64_t> shape;
  std::string raw;
};

// A request parameter (e.g. a generation's max_tokens).
using CallParameter = std::variant<bool, int64_t, double, std::string>;

// What to send.
struct Call {
  uint64_t index = 0;  // the request's index in the workload's sequence: a client may derive more of it from this
  std::string id;      // the request's id on the wire when it is not the index (e.g. --verify's "verify-3")
  std::string model;
  std::vector<CallTensor> inputs;
  std::vector<std::pair<std::string, CallParameter>> parameters;

  std::string wire_id() const { return id.empty() ? std::to_string(index) : id; }
  // True when the call is the workload's request `index` (its id is the index).
  bool from_workload() const { return id.empty(); }
  const CallParameter* Parameter(const std::string& key) const {
    for (const auto& [name, value] : parameters) {
      if (name == key) return &value;
    }
    return nullptr;
  }
};

// What a streamed generation produced. Times are seconds since the request was sent.
struct GeneratedText {
  std::vector<double> chunk_times_s;  // arrival of each content chunk with non-empty text
  std::string text;
  std::optional<int64_t> prompt_tokens, completion_tokens;
  std::string finish_reason;
};

// How a call ended. `code`: a gRPC status code number (HTTP statuses mapped) or one of the load generator's own
// codes (kClientDroppedCode, kUsageMismatchCode).
struct Outcome {
  int code = 0;
  std::string message;               // why it failed; empty when OK
  std::vector<CallTensor> outputs;   // KServe: the answer's tensors (for --verify)
  std::string transcript;            // speech: the recognised text
  std::optional<GeneratedText> generation;  // generation: the streamed result

  bool ok() const { return code == 0; }
  // A call that ended with `code` (0 for OK) and `message`.
  static Outcome Ended(int code, std::string message) {
    Outcome outcome;
    outcome.code = code;
    outcome.message = std::move(message);
    return outcome;
  }
};

// The load generator's own result codes beside gRPC's: -1 an open-loop arrival dropped (--max-outstanding calls in
// flight); -2 a generation whose `usage` disagrees with what was streamed or asked for (openai_stream.h).
inline constexpr int kClientDroppedCode = -1;
inline constexpr int kUsageMismatchCode = -2;

// Canonical upper-case name of a gRPC code ("DEADLINE_EXCEEDED"); "CLIENT_DROPPED" (-1) and "USAGE_MISMATCH" (-2)
// for the load generator's own codes above.
std::string GrpcCodeName(int code);

}  // namespace sluice::loadtest
