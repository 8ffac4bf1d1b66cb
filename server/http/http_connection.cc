#include "server/http/http_connection.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "boost/asio/post.hpp"
#include "boost/asio/ssl/error.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/http/error.hpp"
#include "server/http/http_wire.h"

namespace sluice {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using boost::system::error_code;

constexpr size_t kReadChunk = 16 << 10;

}  // namespace

HttpConnection::LiveToken::~LiveToken() { host->ConnectionDestroyed(); }

HttpConnection::HttpConnection(uint64_t id, Socket socket, asio::ssl::context* tls, HttpConnectionHost* host)
    : live_token_{host},
      id_(id),
      host_(host),
      limits_(host->limits()),
      executor_(socket.get_executor()),
      read_timer_(executor_),
      write_timer_(executor_),
      read_buffer_(kReadChunk) {
  if (tls != nullptr) {
    tls_.emplace(std::move(socket), *tls);
  } else {
    plain_.emplace(std::move(socket));
  }
}

HttpConnection::~HttpConnection() = default;

HttpConnection::Socket& HttpConnection::socket() { return tls_ ? tls_->next_layer() : *plain_; }

template <class Handler>
void HttpConnection::Post(Handler&& handler) {
  asio::post(executor_, std::forward<Handler>(handler));
}

// ---- Entry points from other threads (all post to the strand) ----

void HttpConnection::Start() {
  Post([self = shared_from_this()] { self->StartOnStrand(); });
}

void HttpConnection::StartRejecting(std::string message) {
  admission_.store(kClosing);
  Post([self = shared_from_this(), message = std::move(message)]() mutable {
    self->reject_message_ = std::move(message);
    self->StartOnStrand();
  });
}

bool HttpConnection::TryEvict() {
  int expected = kWaiting;
  if (!admission_.compare_exchange_strong(expected, kClosing)) return false;
  Post([self = shared_from_this()] { self->Close(); });
  return true;
}

void HttpConnection::BeginDrain() {
  Post([self = shared_from_this()] {
    self->draining_ = true;
    int expected = kWaiting;
    if (self->admission_.compare_exchange_strong(expected, kClosing)) self->Close();
    // Otherwise a request is in progress: keep_alive_ is re-checked against draining_ when it is answered.
  });
}

void HttpConnection::Abort() {
  Post([self = shared_from_this()] { self->Close(); });
}

void HttpConnection::PostRespond(std::shared_ptr<HttpExchange> exchange, HttpResponse response) {
  Post([self = shared_from_this(), exchange = std::move(exchange), response = std::move(response)]() mutable {
    self->SendResponse(std::move(exchange), std::move(response));
  });
}

void HttpConnection::PostStartStream(std::shared_ptr<HttpExchange> exchange, int status, std::string content_type,
                                     HttpHeaders headers) {
  Post([self = shared_from_this(), exchange = std::move(exchange), status, content_type = std::move(content_type),
        headers = std::move(headers)]() mutable { self->StartStream(std::move(exchange), status, content_type, headers); });
}

void HttpConnection::PostChunk(std::shared_ptr<HttpExchange> exchange, std::string chunk) {
  Post([self = shared_from_this(), exchange = std::move(exchange), chunk = std::move(chunk)]() mutable {
    self->WriteChunk(exchange, std::move(chunk));
  });
}

void HttpConnection::PostOnWritable(std::shared_ptr<HttpExchange> exchange, size_t low_water,
                                    std::function<void()> callback) {
  Post([self = shared_from_this(), exchange = std::move(exchange), low_water,
        callback = std::move(callback)]() mutable {
    if (self->phase_ == Phase::kClosed || self->active_ != exchange ||
        exchange->stream_buffered_.load() <= low_water) {
      callback();
      return;
    }
    self->writable_waiters_.push_back({low_water, std::move(callback)});
  });
}

void HttpConnection::PostAbandoned(const HttpExchange* exchange) {
  Post([self = shared_from_this(), exchange] {
    if (self->phase_ != Phase::kHandling || self->pending_raw_ != exchange) return;
    self->pending_.reset();
    self->pending_raw_ = nullptr;
    self->FailRequest(500, "the request handler dropped the request without answering", /*linger=*/true);
  });
}

void HttpConnection::PostStreamDropped(std::shared_ptr<HttpExchange> exchange) {
  Post([self = shared_from_this(), exchange = std::move(exchange)] {
    if (self->active_ == exchange && !self->stream_ended_) self->Close();
  });
}

// ---- Reading and parsing ----

void HttpConnection::StartOnStrand() {
  // A new connection must deliver its first head (and TLS handshake) within header_timeout of the accept.
  ArmReadTimer(limits_.header_timeout);
  if (!tls_) {
    OnHandshake({});
    return;
  }
  tls_->async_handshake(asio::ssl::stream_base::server,
                        [self = shared_from_this()](const error_code& ec) { self->OnHandshake(ec); });
}

void HttpConnection::OnHandshake(const error_code& ec) {
  if (phase_ == Phase::kClosed) return;
  if (ec) return Close();
  if (!reject_message_.empty()) return FailRequest(503, reject_message_, /*linger=*/true);
  phase_ = Phase::kHead;
  NewParser();
  MaybeRead();
}

void HttpConnection::NewParser() {
  parser_.emplace();
  ConfigureRequestParser(limits_.max_header_bytes, limits_.max_body_bytes, *parser_);
  head_consumed_ = 0;
  head_bytes_seen_ = !in_.empty();
}

void HttpConnection::BeginRequest() {
  if (draining_ || (peer_eof_ && in_.empty())) return StartLinger();  // StartLinger closes after a peer's EOF
  phase_ = Phase::kIdle;
  admission_.store(kWaiting);
  stream_ended_ = false;
  NewParser();
  if (in_.empty()) {
    ArmReadTimer(limits_.idle_timeout);
  } else {
    phase_ = Phase::kHead;  // pipelined bytes: the next head has started
    ArmReadTimer(limits_.header_timeout);
    Parse();
    // The client half-closed after pipelining: a request it did not finish never will be.
    if (peer_eof_ && (phase_ == Phase::kHead || phase_ == Phase::kBody)) return Close();
  }
  MaybeRead();
}

void HttpConnection::MaybeRead() {
  if (reading_ || peer_eof_) return;
  const size_t header_max = static_cast<size_t>(limits_.max_header_bytes);
  size_t room = 0;
  switch (phase_) {
    case Phase::kIdle:
    case Phase::kHead: {
      // One byte over the limit is what tells an over-long head from one that just fits.
      const size_t head = head_consumed_ + in_.size();
      room = head <= header_max ? header_max + 1 - head : 0;
      break;
    }
    case Phase::kBody:
      room = in_.size() < header_max ? kReadChunk : 0;  // the parser consumes the body as it comes
      break;
    case Phase::kHandling:
    case Phase::kResponding:
      // Keep a read pending to notice a disconnect; keep pipelined bytes, but no more than one head's worth.
      room = in_.size() < header_max ? header_max - in_.size() : 0;
      break;
    case Phase::kLinger:
      room = kReadChunk;  // discarded
      break;
    case Phase::kHandshake:
    case Phase::kClosed:
      return;
  }
  room = std::min(room, read_buffer_.size());
  if (room == 0) return;
  reading_ = true;
  auto buffer = asio::buffer(read_buffer_.data(), room);
  auto done = [self = shared_from_this()](const error_code& ec, size_t bytes) { self->OnRead(ec, bytes); };
  if (tls_) {
    tls_->async_read_some(buffer, std::move(done));
  } else {
    plain_->async_read_some(buffer, std::move(done));
  }
}

void HttpConnection::OnRead(const error_code& ec, size_t bytes) {
  reading_ = false;
  if (phase_ == Phase::kClosed) return;
  if (phase_ == Phase::kLinger) {
    if (!ec) return MaybeRead();
    // The client has stopped sending; close once our error response is out.
    peer_eof_ = true;
    if (!writing_ && out_.empty() && !finish_when_flushed_) Close();
    return;
  }
  if (ec) {
    // EOF once a request is complete: the client half-closed (shutdown(SHUT_WR)) and sends no more requests, but
    // may still read the answer. Anything else (a reset, EOF inside a request) means the client is gone.
    const bool eof = ec == asio::error::eof || ec == asio::ssl::error::stream_truncated;
    if (eof && (phase_ == Phase::kHandling || phase_ == Phase::kResponding)) return OnPeerEof();
    return Close();
  }
  in_.append(read_buffer_.data(), bytes);
  if (phase_ == Phase::kIdle) {
    phase_ = Phase::kHead;
    ArmReadTimer(limits_.header_timeout);  // from the first byte of the head; trickling does not extend it
  }
  if (phase_ == Phase::kHead) head_bytes_seen_ = true;
  if (phase_ == Phase::kHead || phase_ == Phase::kBody) Parse();
  MaybeRead();
}

void HttpConnection::OnPeerEof() {
  peer_eof_ = true;
  // Answer what was received in full, then close (BeginRequest); say so in the answer's Connection header.
  if (in_.empty()) keep_alive_ = false;
  // A half-close and a full close look the same from here. A full close is told apart by the reset the client's
  // kernel sends once we write: so an unanswered HTTP/1.1 request gets an interim 100 Continue (every 1.1 client
  // must accept unexpected 1xx responses; 1.0 clients must not get one), and a reset closes the connection, which
  // tells the exchange that the client is gone. Otherwise the answer is written as usual.
  if (phase_ == Phase::kHandling && !http10_) QueueWrite(std::string(kContinue), 0);
  socket().async_wait(Socket::wait_error, [self = shared_from_this()](const error_code& ec) {
    if (!ec) self->Close();  // the reset; operation_aborted once we close ourselves
  });
}

void HttpConnection::Parse() {
  while (phase_ == Phase::kHead || phase_ == Phase::kBody) {
    if (phase_ == Phase::kBody && parser_->is_done()) return OnRequestDone();
    if (in_.empty()) return;
    boost::beast::error_code ec;
    const size_t used = parser_->put(asio::buffer(in_), ec);
    in_.erase(0, used);
    if (phase_ == Phase::kHead) head_consumed_ += used;
    if (ec == http::error::need_more) {
      if (used > 0) continue;
      // Beast may keep part of a head unconsumed; the limit is on the whole head.
      if (phase_ == Phase::kHead && head_consumed_ + in_.size() > static_cast<size_t>(limits_.max_header_bytes)) {
        ec = http::error::header_limit;
      } else if (phase_ == Phase::kBody && in_.size() >= static_cast<size_t>(limits_.max_header_bytes)) {
        return FailRequest(400, "malformed request: a chunk header is over the header limit", /*linger=*/true);
      } else {
        return;
      }
    }
    if (ec) {
      RequestError error =
          MapParseError(ec, DeclaredContentLength(*parser_), limits_.max_header_bytes, limits_.max_body_bytes);
      return FailRequest(error.status, std::move(error.message), /*linger=*/true);
    }
    if (phase_ == Phase::kHead && parser_->is_header_done()) {
      // Beast's header_limit bounds the start line and the fields each, not the whole head: a head of exactly
      // max_header_bytes + 1 bytes (all that MaybeRead lets in) would otherwise pass.
      if (head_consumed_ > static_cast<size_t>(limits_.max_header_bytes)) {
        RequestError error = MapParseError(http::error::header_limit, std::nullopt, limits_.max_header_bytes,
                                           limits_.max_body_bytes);
        return FailRequest(error.status, std::move(error.message), /*linger=*/true);
      }
      if (!OnHeadDone()) return;
    }
  }
}

bool HttpConnection::OnHeadDone() {
  int expected = kWaiting;
  if (!admission_.compare_exchange_strong(expected, kBusy)) {
    Close();  // evicted, or the server is stopping
    return false;
  }
  phase_ = Phase::kBody;
  ArmReadTimer(limits_.body_timeout);
  const auto& head = parser_->get();
  if (head.find(http::field::transfer_encoding) != head.end() && !parser_->chunked()) {
    FailRequest(400, "malformed request: only the chunked Transfer-Encoding is supported", /*linger=*/true);
    return false;
  }
  // curl waits (up to a second) for this before sending a body over 1 MB. Over-limit bodies never get here: they
  // were refused from their Content-Length.
  if (!parser_->is_done() && head.version() >= 11 && in_.empty() &&
      EqualsIgnoreCase(TrimFieldValue(head[http::field::expect]), "100-continue")) {
    QueueWrite(std::string(kContinue), 0);
  }
  return true;
}

void HttpConnection::OnRequestDone() {
  DisarmReadTimer();
  auto message = parser_->release();
  parser_.reset();
  ++requests_;
  http10_ = message.version() < 11;
  keep_alive_ = message.keep_alive() && requests_ < limits_.max_requests_per_connection && !(peer_eof_ && in_.empty());
  head_request_ = message.method() == http::verb::head;

  HttpRequest request;
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  request.path = request.target.substr(0, request.target.find('?'));
  for (const auto& field : message) {
    request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  request.body = std::move(message.body());

  auto exchange = std::shared_ptr<HttpExchange>(new HttpExchange(weak_from_this()));
  pending_ = exchange;
  pending_raw_ = exchange.get();
  phase_ = Phase::kHandling;
  host_->Handle(std::move(request), std::move(exchange));
}

void HttpConnection::FailRequest(int status, std::string message, bool linger) {
  admission_.store(kClosing);
  DisarmReadTimer();
  parser_.reset();
  in_.clear();
  keep_alive_ = false;
  linger_ = linger;
  phase_ = Phase::kLinger;  // from now on, what the client sends is discarded
  finish_when_flushed_ = true;
  QueueWrite(SerializeErrorResponse(status, message), 0);
}

void HttpConnection::ArmReadTimer(absl::Duration timeout) {
  const uint64_t generation = ++read_timer_generation_;
  read_timer_.expires_after(absl::ToChronoNanoseconds(timeout));
  read_timer_.async_wait([self = shared_from_this(), generation](const error_code& ec) {
    if (!ec && generation == self->read_timer_generation_) self->OnReadTimeout();
  });
}

void HttpConnection::DisarmReadTimer() {
  ++read_timer_generation_;
  read_timer_.cancel();
}

void HttpConnection::OnReadTimeout() {
  switch (phase_) {
    case Phase::kHead:
      if (!head_bytes_seen_) return Close();
      return FailRequest(408, absl::StrCat("the request head did not arrive within ",
                                           absl::FormatDuration(limits_.header_timeout)),
                         /*linger=*/false);
    case Phase::kBody:
      return FailRequest(408, absl::StrCat("the request body did not arrive within ",
                                           absl::FormatDuration(limits_.body_timeout)),
                         /*linger=*/false);
    case Phase::kHandshake:
    case Phase::kIdle:
    case Phase::kLinger:
      return Close();
    case Phase::kHandling:
    case Phase::kResponding:
    case Phase::kClosed:
      return;
  }
}

void HttpConnection::Close() {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosed;
  admission_.store(kClosing);
  ++read_timer_generation_;
  ++write_timer_generation_;
  read_timer_.cancel();
  write_timer_.cancel();
  error_code ignored;
  socket().shutdown(Socket::shutdown_both, ignored);
  socket().close(ignored);  // pending operations complete with operation_aborted
  out_.clear();
  parser_.reset();
  in_.clear();
  std::shared_ptr<HttpExchange> exchange = active_ ? std::move(active_) : pending_.lock();
  active_.reset();
  pending_.reset();
  pending_raw_ = nullptr;
  host_->ConnectionClosed(id_);
  if (exchange) {
    exchange->stream_buffered_.store(0);  // what was queued is dropped
    exchange->MarkClientGone();
  }
  RunWritableWaiters();
}

}  // namespace sluice
