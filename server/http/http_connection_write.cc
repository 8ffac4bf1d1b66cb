// HttpConnection's response side: answers and streams from the exchange, the write queue, the write timeout,
// stream backpressure, and what follows a complete response (the next request, or a lingering close).
// The reading side is in http_connection.cc. Everything here runs on the connection's strand.

#include <utility>
#include <vector>

#include "boost/asio/write.hpp"
#include "server/http/http_connection.h"
#include "server/http/http_wire.h"

namespace sluice {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;

// How long a connection that the server closes keeps discarding what the client still sends: closing a socket with
// unread input sends a reset, which can destroy the error response before the client has read it.
constexpr absl::Duration kLingerTime = absl::Seconds(1);

}  // namespace

bool HttpConnection::IsCurrent(const std::shared_ptr<HttpExchange>& exchange) const {
  return phase_ == Phase::kHandling && exchange.get() == pending_raw_;
}

void HttpConnection::SendResponse(std::shared_ptr<HttpExchange> exchange, HttpResponse response) {
  if (!IsCurrent(exchange)) return;  // the client is gone (closed) or this exchange was already answered
  pending_.reset();
  pending_raw_ = nullptr;
  active_ = std::move(exchange);
  phase_ = Phase::kResponding;
  keep_alive_ = keep_alive_ && !draining_;
  ResponseHead head;
  head.status = response.status;
  head.content_type = response.content_type;
  head.extra = &response.headers;
  head.content_length = response.body.size();
  head.keep_alive = keep_alive_;
  head.http10 = http10_;
  finish_when_flushed_ = true;
  QueueWrite(SerializeResponseHead(head), 0);
  // A separate buffer (gathered into the same write) so that a large body is not copied.
  if (!head_request_ && !response.body.empty()) QueueWrite(std::move(response.body), 0);
}

void HttpConnection::StartStream(std::shared_ptr<HttpExchange> exchange, int status, const std::string& content_type,
                                 const HttpHeaders& headers) {
  if (!IsCurrent(exchange)) return;
  pending_.reset();
  pending_raw_ = nullptr;
  active_ = std::move(exchange);
  phase_ = Phase::kResponding;
  stream_ended_ = false;
  // HTTP/1.0 has no chunked encoding: the body is sent as is and ends when the connection closes.
  keep_alive_ = keep_alive_ && !draining_ && !http10_;
  ResponseHead head;
  head.status = status;
  head.content_type = content_type;
  head.extra = &headers;
  head.keep_alive = keep_alive_;
  head.http10 = http10_;
  QueueWrite(SerializeResponseHead(head), 0);  // at once: an SSE client sees the head before the first event
}

void HttpConnection::WriteChunk(const std::shared_ptr<HttpExchange>& exchange, std::string chunk) {
  if (phase_ != Phase::kResponding || active_ != exchange || stream_ended_) return;
  if (chunk.empty()) {
    stream_ended_ = true;
    finish_when_flushed_ = true;
    if (!http10_) QueueWrite(std::string(kLastChunk), 0);
    MaybeFinish();  // nothing may be left to write
    return;
  }
  const size_t payload = chunk.size();
  QueueWrite(http10_ ? std::move(chunk) : FrameChunk(chunk), payload);
}

void HttpConnection::QueueWrite(std::string data, size_t payload) {
  out_.push_back({std::move(data), payload});
  MaybeWrite();
}

void HttpConnection::MaybeWrite() {
  if (writing_ || out_.empty() || phase_ == Phase::kClosed) return;
  writing_ = true;
  // Everything queued goes out in one gathered write: fewer syscalls for many small SSE chunks.
  std::vector<asio::const_buffer> buffers;
  buffers.reserve(out_.size());
  while (!out_.empty()) {
    in_flight_.push_back(std::move(out_.front()));
    out_.pop_front();
  }
  for (const OutBuffer& buffer : in_flight_) buffers.push_back(asio::buffer(buffer.data));

  const uint64_t generation = ++write_timer_generation_;
  write_timer_.expires_after(absl::ToChronoNanoseconds(limits_.write_timeout));
  write_timer_.async_wait([self = shared_from_this(), generation](const error_code& ec) {
    if (!ec && generation == self->write_timer_generation_) self->Close();  // the client does not read
  });
  auto done = [self = shared_from_this()](const error_code& ec, size_t) { self->OnWritten(ec); };
  if (tls_) {
    asio::async_write(*tls_, buffers, std::move(done));
  } else {
    asio::async_write(*plain_, buffers, std::move(done));
  }
}

void HttpConnection::OnWritten(const error_code& ec) {
  writing_ = false;
  ++write_timer_generation_;
  write_timer_.cancel();
  size_t payload = 0;
  for (const OutBuffer& buffer : in_flight_) payload += buffer.payload;
  in_flight_.clear();
  if (phase_ == Phase::kClosed) return;
  if (ec) return Close();
  if (payload > 0 && active_) {
    active_->stream_buffered_.fetch_sub(payload);
    RunWritableWaiters();
  }
  MaybeWrite();
  MaybeFinish();
}

void HttpConnection::MaybeFinish() {
  if (writing_ || !out_.empty() || !finish_when_flushed_ || phase_ == Phase::kClosed) return;
  finish_when_flushed_ = false;
  FinishExchange();
}

void HttpConnection::FinishExchange() {
  if (active_) {
    active_->MarkFinished();
    active_.reset();
  }
  RunWritableWaiters();  // nothing is buffered any more
  if (phase_ == Phase::kLinger) {
    // An error response of ours is out.
    if (linger_) return StartLinger();
    return Close();
  }
  if (!keep_alive_ || draining_) return StartLinger();
  BeginRequest();
}

void HttpConnection::RunWritableWaiters() {
  if (writable_waiters_.empty()) return;
  const size_t buffered = active_ ? active_->stream_buffered_.load() : 0;
  std::vector<WritableWaiter> ready;
  std::vector<WritableWaiter> waiting;
  for (WritableWaiter& waiter : writable_waiters_) {
    (buffered <= waiter.low_water ? ready : waiting).push_back(std::move(waiter));
  }
  writable_waiters_ = std::move(waiting);
  for (WritableWaiter& waiter : ready) waiter.callback();  // may post more work; never re-enters this
}

void HttpConnection::StartLinger() {
  phase_ = Phase::kLinger;
  admission_.store(kClosing);
  parser_.reset();
  in_.clear();
  error_code ignored;
  socket().shutdown(Socket::shutdown_send, ignored);  // the client sees the end of our data
  // A stopping server does not wait for the client: what it sent meanwhile was read (a read stays pending while
  // a response is written), so closing now does not reset the connection.
  if (peer_eof_ || draining_) return Close();
  ArmReadTimer(kLingerTime);
  MaybeRead();
}

}  // namespace sluice
