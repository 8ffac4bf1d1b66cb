// A generic event-driven HTTP/1.1 (and HTTPS) server on Boost.Beast/Asio, for the KServe REST routes and
// anything else that speaks HTTP. A few io threads run one event loop; no thread is parked per connection or per
// request, so idle keep-alive connections, slow clients and slow handlers cost memory bounded by HttpLimits, not
// threads. Hostile clients are cut off by limits: the whole request head must arrive within header_timeout,
// oversized heads and bodies are refused before they are read, and at max_connections the oldest connection without
// a request in progress makes room for the new one.
//
// Thread-safety: Start/Stop/the destructor from one owning thread, never from an io thread (a handler or a
// callback). port() and open_connections() from any thread. The handler runs on an io thread and must not block;
// it answers through HttpExchange (server/http/http_exchange.h), which is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/http/http_exchange.h"

namespace sluice {

struct HttpLimits {
  // At the limit, the oldest connection that has no request in progress (idle keep-alive, or still sending its
  // head) is closed to admit the new one; if every connection is busy, the new one gets 503 and is closed.
  int max_connections = 4096;
  // Request line + header fields. Over it: 431 + JSON error, connection closed. No more than this is buffered.
  int64_t max_header_bytes = 16 << 10;
  // A Content-Length over it is answered 413 at once, before the body is read; a chunked body is cut off at it.
  int64_t max_body_bytes = 64 << 20;
  // The whole request head must arrive within this, counted from its first byte (from the accept for a new
  // connection); trickling does not extend it. Then 408 (best effort) and close.
  absl::Duration header_timeout = absl::Seconds(10);
  absl::Duration body_timeout = absl::Seconds(60);   // the whole body, from the end of the head; then 408 + close
  absl::Duration idle_timeout = absl::Seconds(60);   // keep-alive wait for the next request; then close
  // One socket write (a response, or a batch of stream chunks) that the client does not read; then close (the
  // exchange's OnClientGone fires).
  absl::Duration write_timeout = absl::Seconds(60);
  int max_requests_per_connection = 10000;  // the last one is answered with Connection: close
};

struct HttpServerOptions {
  std::string address;  // "host:port" ("[::1]:port" for IPv6); port 0 = any free port
  int threads = 2;      // io threads running the event loop (handlers run on them: they must not block)
  HttpLimits limits;
  std::string tls_cert_path, tls_key_path;  // both set: HTTPS (PEM certificate chain and private key)
};

class HttpServer {
 public:
  // Binds and listens at once (so clients can connect while the caller is still loading), then serves on
  // options.threads io threads. Errors: Unavailable("cannot listen for HTTP on <address>: address already in use")
  // and the like; InvalidArgument for a bad address or options, and for TLS files, naming the file and what is
  // wrong (cannot be read, not a PEM certificate, key not matching the certificate). No SO_REUSEPORT: a second
  // server on a port in use fails.
  // Also raises RLIMIT_NOFILE's soft limit to the hard limit: every connection is a file descriptor, and the usual
  // soft limit of 1024 would cap max_connections far below its default.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options, HttpHandler handler);

  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;

  // Stops accepting, closes idle connections, lets in-progress exchanges be answered for up to `grace`, then closes
  // everything (outstanding exchanges see OnClientGone) and joins the io threads. Idempotent.
  void Stop(absl::Duration grace = absl::Seconds(2));

  // Connections open now (sockets accepted and not yet closed), for tests and metrics.
  int open_connections() const;

 private:
  class Impl;  // server/http/http_server.cc: keeps Boost out of this header
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice
