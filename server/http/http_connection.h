// One accepted HTTP/1.1 connection (plain or TLS) of HttpServer: reads and parses requests with Beast's parser
// under HttpLimits, hands each to the server's handler as an HttpExchange, writes the answers (whole or chunked),
// and keeps the connection alive between requests. Internal to server/http_*.cc.
//
// Life cycle: idle/head (evictable) -> body -> handling (the handler has the exchange; a read stays pending so that
// a disconnect is seen and pipelined bytes are kept, up to max_header_bytes) -> responding -> idle again, or
// closed. Errors before the handler (400/408/413/431/503) are written, then the connection "lingers": it stops
// sending, discards what the client still sends for up to a second, and closes, so that the client reads the error
// instead of a reset. A client that half-closes after a complete request (EOF while it is handled) still gets its
// answer (and those of requests it pipelined before), then the connection closes.
//
// Thread-safety: every field except admission_ is touched only on the connection's strand (the socket's
// executor), so none is locked. The public methods may be called from any thread: they post to the strand.
// Callbacks (the handler, OnClientGone, OnWritable) are called on the strand with no lock held. The connection is
// kept alive by the server's registry until it closes, and by its pending operations; exchanges hold it weakly.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/ssl/context.hpp"
#include "boost/asio/ssl/stream.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/beast/http/parser.hpp"
#include "boost/beast/http/string_body.hpp"
#include "server/http/http_exchange.h"
#include "server/http/http_server.h"
#include "server/http/http_wire.h"

namespace sluice {

// What a connection needs from its server. The server outlives every connection (Stop waits for them).
class HttpConnectionHost {
 public:
  virtual ~HttpConnectionHost() = default;
  virtual const HttpLimits& limits() const = 0;
  // Calls the user's handler (on the connection's strand).
  virtual void Handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) = 0;
  virtual void ConnectionClosed(uint64_t id) = 0;  // once, when the socket is closed
  virtual void ConnectionDestroyed() = 0;          // from the destructor
};

class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  using Socket = boost::asio::ip::tcp::socket;

  // `socket`'s executor must be a strand. `tls`: null for plain HTTP; not owned, outlives the connection.
  HttpConnection(uint64_t id, Socket socket, boost::asio::ssl::context* tls, HttpConnectionHost* host);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  uint64_t id() const { return id_; }

  // Any thread. Start serving; or answer 503 (over the connection limit) and close.
  void Start();
  void StartRejecting(std::string message);
  // Any thread. Closes the connection if it has no request in progress; false (and no effect) if it has one.
  bool TryEvict();
  // Any thread. Server stopping: close now if no request is in progress, else after the current response.
  void BeginDrain();
  // Any thread. Close now; an outstanding exchange sees OnClientGone.
  void Abort();

  // From HttpExchange / HttpStream, any thread.
  void PostRespond(std::shared_ptr<HttpExchange> exchange, HttpResponse response);
  void PostStartStream(std::shared_ptr<HttpExchange> exchange, int status, std::string content_type,
                       HttpHeaders headers);
  void PostChunk(std::shared_ptr<HttpExchange> exchange, std::string chunk);  // empty: the last chunk
  void PostOnWritable(std::shared_ptr<HttpExchange> exchange, size_t low_water, std::function<void()> callback);
  void PostAbandoned(const HttpExchange* exchange);  // destroyed unanswered: 500
  void PostStreamDropped(std::shared_ptr<HttpExchange> exchange);  // stream destroyed unclosed: abort

 private:
  enum class Phase { kHandshake, kIdle, kHead, kBody, kHandling, kResponding, kLinger, kClosed };
  // Shared with the accepting thread for eviction: only kWaiting connections may be evicted.
  enum Admission : int { kWaiting, kBusy, kClosing };
  struct OutBuffer {
    std::string data;
    size_t payload = 0;  // stream payload bytes in it (for HttpStream::buffered_bytes)
  };
  struct WritableWaiter {
    size_t low_water;
    std::function<void()> callback;
  };
  using Parser = RequestParser;  // configured by ConfigureRequestParser (http_wire.h)

  // Declared first so that it is destroyed last: the server may destroy the io_context as soon as the last
  // connection reports itself destroyed, so every socket and timer must already be gone by then.
  struct LiveToken {
    HttpConnectionHost* host;
    ~LiveToken();
  };

  Socket& socket();
  template <class Handler>
  void Post(Handler&& handler);

  void StartOnStrand();
  void OnHandshake(const boost::system::error_code& ec);
  void NewParser();
  void BeginRequest();  // idle: wait for the next head (or parse pipelined bytes)
  void MaybeRead();
  void OnRead(const boost::system::error_code& ec, size_t bytes);
  void OnPeerEof();  // EOF while a request is handled or answered: the client half-closed (or left)
  void Parse();
  bool OnHeadDone();  // false: the connection was refused or closed
  void OnRequestDone();
  void FailRequest(int status, std::string message, bool linger);

  bool IsCurrent(const std::shared_ptr<HttpExchange>& exchange) const;
  void SendResponse(std::shared_ptr<HttpExchange> exchange, HttpResponse response);
  void StartStream(std::shared_ptr<HttpExchange> exchange, int status, const std::string& content_type,
                   const HttpHeaders& headers);
  void WriteChunk(const std::shared_ptr<HttpExchange>& exchange, std::string chunk);
  void QueueWrite(std::string data, size_t payload);
  void MaybeWrite();
  void OnWritten(const boost::system::error_code& ec);
  void MaybeFinish();
  void FinishExchange();
  void RunWritableWaiters();
  void StartLinger();

  void ArmReadTimer(absl::Duration timeout);
  void DisarmReadTimer();
  void OnReadTimeout();
  void Close();

  LiveToken live_token_;
  const uint64_t id_;
  HttpConnectionHost* const host_;
  const HttpLimits limits_;
  const Socket::executor_type executor_;  // the strand
  std::optional<Socket> plain_;
  std::optional<boost::asio::ssl::stream<Socket>> tls_;
  boost::asio::steady_timer read_timer_;
  boost::asio::steady_timer write_timer_;
  uint64_t read_timer_generation_ = 0;  // a timer callback of an older generation was superseded
  uint64_t write_timer_generation_ = 0;
  std::atomic<int> admission_{kWaiting};

  Phase phase_ = Phase::kHandshake;
  std::string reject_message_;  // non-empty: answer 503 with it after the handshake
  bool draining_ = false;
  bool reading_ = false;
  bool peer_eof_ = false;
  std::vector<char> read_buffer_;
  std::string in_;  // bytes read and not yet parsed
  std::optional<Parser> parser_;
  size_t head_consumed_ = 0;  // bytes of the current head the parser has consumed (the limit is on the whole head)
  bool head_bytes_seen_ = false;
  bool linger_ = true;  // after an error response: linger (true) or close at once (timeouts)
  int requests_ = 0;

  // The current exchange: held weakly until answered (so that one dropped unanswered is noticed), then strongly.
  std::weak_ptr<HttpExchange> pending_;
  const HttpExchange* pending_raw_ = nullptr;
  std::shared_ptr<HttpExchange> active_;
  bool keep_alive_ = false;
  bool http10_ = false;
  bool head_request_ = false;
  bool stream_ended_ = false;
  bool finish_when_flushed_ = false;

  std::deque<OutBuffer> out_;          // queued, not yet handed to the socket
  std::vector<OutBuffer> in_flight_;   // handed to the socket; kept until the write completes
  bool writing_ = false;
  std::vector<WritableWaiter> writable_waiters_;
};

}  // namespace sluice
