// One HTTP request/response exchange as the handler sees it: the parsed HttpRequest, and the HttpExchange
// through which it is answered once, either with a whole HttpResponse or with a chunked HttpStream
// (Server-Sent Events, token streaming). The server side is HttpConnection (server/http/http_connection.h).
//
// Thread-safety: HttpExchange and HttpStream may be used from any thread: a handler may answer later. Respond,
// StartStream, Write, Close and OnWritable only post work to the connection's strand (no socket I/O on the
// caller's thread, no waiting); OnClientGone and the strand share one leaf mutex per exchange, held only to swap
// the callback. Callbacks (OnClientGone, OnWritable) run with no lock of ours held, normally on the connection's
// strand (an io thread: they must not block), except that they run at once on the calling thread when the client
// (OnClientGone) or the server (OnWritable) is already gone.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "backend/base/sync.h"

namespace sluice {

class HttpConnection;
class HttpStream;

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// The parsed request handed to the handler.
struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent, e.g. "/v2/models/x/infer?y=1"
  std::string path;    // target without the query
  HttpHeaders headers;  // in the order received, names as sent
  std::string body;     // de-chunked when the request came chunked

  // Case-insensitive; the first field of that name. The view points into `headers`.
  std::optional<std::string_view> Header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  // Extra fields. Content-Length, Transfer-Encoding and Connection are the server's, and Content-Type is
  // content_type below: those are dropped here, as is any field whose name or value holds CR, LF or NUL (response
  // splitting).
  HttpHeaders headers;
  std::string content_type = "application/json";
  std::string body;
};

// One request/response exchange; shared_ptr, thread-safe: a handler may answer later from any thread.
// A handler that drops its last reference without answering gets a 500 sent for it (a lost request never leaves
// its client waiting).
class HttpExchange : public std::enable_shared_from_this<HttpExchange> {
 public:
  HttpExchange(const HttpExchange&) = delete;
  HttpExchange& operator=(const HttpExchange&) = delete;
  ~HttpExchange();

  // Exactly one of Respond / StartStream may be called, once; later calls are ignored and return false (StartStream
  // returns nullptr). Respond also returns false when the client is already gone (nothing is sent then).
  bool Respond(HttpResponse response);

  // Starts a chunked response (Transfer-Encoding: chunked), e.g. Server-Sent Events with content_type
  // "text/event-stream". The head is sent at once (an SSE client sees it before the first event). To an HTTP/1.0
  // client the body is sent unchunked and ends with the connection. A stream dropped without Close() aborts the
  // connection, so that the client sees a truncated body instead of a complete-looking one. If the client is
  // already gone, a stream is still returned; its Write returns false.
  std::shared_ptr<HttpStream> StartStream(int status, std::string content_type, HttpHeaders headers = {});

  // Called at most once, on an io thread, when the client disconnects (or the exchange is abandoned by a timeout or
  // a server stop) before the response was completely written. A client that only half-closed its side after the
  // request is not gone: it gets the answer. Set it before submitting work. If the client is
  // already gone, it runs at once on the calling thread; once the response is completely written, never.
  void OnClientGone(std::function<void()> callback);
  bool client_gone() const { return client_gone_.load(std::memory_order_acquire); }

 private:
  friend class HttpConnection;
  friend class HttpStream;

  explicit HttpExchange(std::weak_ptr<HttpConnection> connection) : connection_(std::move(connection)) {}

  // Called by the connection on its strand. MarkClientGone runs the callback (if any) with no lock held.
  void MarkClientGone();
  void MarkFinished();

  const std::weak_ptr<HttpConnection> connection_;
  std::atomic<bool> answered_{false};     // Respond or StartStream was called
  std::atomic<bool> client_gone_{false};
  std::atomic<bool> finished_{false};     // response completely written: OnClientGone can no longer fire
  std::atomic<size_t> stream_buffered_{0};  // HttpStream payload bytes queued and not yet written

  mutable Mutex mu_;
  std::function<void()> on_client_gone_ ABSL_GUARDED_BY(mu_);
};

// Chunked writer with backpressure; thread-safe. Created by HttpExchange::StartStream.
class HttpStream {
 public:
  HttpStream(const HttpStream&) = delete;
  HttpStream& operator=(const HttpStream&) = delete;
  ~HttpStream();

  // Queues one chunk (an empty one is ignored: it would end the stream). Returns false if the client is gone or the
  // stream is closed. Chunks are sent in order; one racing with Close() on another thread may be dropped.
  bool Write(std::string chunk);

  // Payload bytes queued and not yet written to the socket.
  size_t buffered_bytes() const { return exchange_->stream_buffered_.load(std::memory_order_acquire); }

  // Backpressure: `callback` runs once, on an io thread, as soon as buffered_bytes() <= low_water (soon, if it
  // already is). Producers stop writing above a high-water mark of their choosing and resume from here. It also runs
  // when the client goes (what was queued is dropped, so buffered_bytes() is then 0 and Write returns false); once
  // the server itself is gone, at once on the calling thread.
  void OnWritable(size_t low_water, std::function<void()> callback);

  // Writes the terminating chunk; the connection may then serve its next request. Idempotent.
  void Close();

  const std::shared_ptr<HttpExchange>& exchange() const { return exchange_; }

 private:
  friend class HttpExchange;
  explicit HttpStream(std::shared_ptr<HttpExchange> exchange) : exchange_(std::move(exchange)) {}

  const std::shared_ptr<HttpExchange> exchange_;
  std::atomic<bool> closed_{false};
};

using HttpHandler = std::function<void(HttpRequest request, std::shared_ptr<HttpExchange> exchange)>;

}  // namespace sluice
