#include "server/http/http_exchange.h"

#include <utility>

#include "server/http/http_connection.h"
#include "server/http/http_wire.h"

namespace sluice {

std::optional<std::string_view> HttpRequest::Header(std::string_view name) const {
  for (const auto& [field, value] : headers) {
    if (EqualsIgnoreCase(field, name)) return std::string_view(value);
  }
  return std::nullopt;
}

HttpExchange::~HttpExchange() {
  if (answered_.load()) return;
  // The handler let go without answering (an error path that forgot, an exception): answer 500 for it.
  if (auto connection = connection_.lock()) connection->PostAbandoned(this);
}

bool HttpExchange::Respond(HttpResponse response) {
  if (answered_.exchange(true)) return false;
  if (client_gone()) return false;
  std::shared_ptr<HttpConnection> connection = connection_.lock();
  if (!connection) return false;
  connection->PostRespond(shared_from_this(), std::move(response));
  return true;
}

std::shared_ptr<HttpStream> HttpExchange::StartStream(int status, std::string content_type, HttpHeaders headers) {
  if (answered_.exchange(true)) return nullptr;
  auto stream = std::shared_ptr<HttpStream>(new HttpStream(shared_from_this()));
  // A stream to a client already gone is still returned: its Write returns false, which producers check anyway.
  if (client_gone()) return stream;
  if (std::shared_ptr<HttpConnection> connection = connection_.lock()) {
    connection->PostStartStream(shared_from_this(), status, std::move(content_type), std::move(headers));
  }
  return stream;
}

void HttpExchange::OnClientGone(std::function<void()> callback) {
  if (finished_.load()) return;
  {
    MutexLock lock(&mu_);
    if (!client_gone_.load()) {
      on_client_gone_ = std::move(callback);
      return;
    }
  }
  callback();  // already gone: at once, with no lock held
}

void HttpExchange::MarkClientGone() {
  std::function<void()> callback;
  {
    MutexLock lock(&mu_);
    if (finished_.load() || client_gone_.exchange(true)) return;
    callback = std::move(on_client_gone_);
    on_client_gone_ = nullptr;
  }
  if (callback) callback();
}

void HttpExchange::MarkFinished() {
  std::function<void()> dropped;
  {
    MutexLock lock(&mu_);
    finished_.store(true);
    dropped = std::move(on_client_gone_);  // released outside the lock: it may own objects with destructors
    on_client_gone_ = nullptr;
  }
}

HttpStream::~HttpStream() {
  if (closed_.load()) return;
  if (auto connection = exchange_->connection_.lock()) connection->PostStreamDropped(exchange_);
}

bool HttpStream::Write(std::string chunk) {
  if (closed_.load() || exchange_->client_gone()) return false;
  std::shared_ptr<HttpConnection> connection = exchange_->connection_.lock();
  if (!connection) return false;
  if (chunk.empty()) return true;
  exchange_->stream_buffered_.fetch_add(chunk.size());
  connection->PostChunk(exchange_, std::move(chunk));
  return true;
}

void HttpStream::OnWritable(size_t low_water, std::function<void()> callback) {
  std::shared_ptr<HttpConnection> connection = exchange_->connection_.lock();
  if (!connection) {
    callback();  // the server is gone: nothing will ever be buffered again
    return;
  }
  connection->PostOnWritable(exchange_, low_water, std::move(callback));
}

void HttpStream::Close() {
  if (closed_.exchange(true)) return;
  if (auto connection = exchange_->connection_.lock()) connection->PostChunk(exchange_, std::string());
}

}  // namespace sluice
