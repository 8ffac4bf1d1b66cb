#include "server/http/http_server.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/ssl/context.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/strand.hpp"
#include "openssl/ssl.h"
#include "backend/base/sync.h"
#include "server/http/http_connection.h"
#include "server/http/http_wire.h"

namespace sluice {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

constexpr int kListenBacklog = 1024;  // connect bursts (a load generator's ramp) are queued, not dropped
// After a failed accept (EMFILE: out of file descriptors) retry later instead of spinning on the error.
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(50);

void RaiseFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);  // best effort: the limit we have still works, just lower
  }
}

absl::Status CheckReadable(const std::string& path, std::string_view what) {
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS ", std::string(what), " file ", path, ": cannot be read: ", std::strerror(errno)));
  }
  std::fclose(file);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<asio::ssl::context>> MakeTlsContext(const std::string& cert, const std::string& key) {
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError("HTTPS needs both a TLS certificate and a key file; only one is set");
  }
  if (absl::Status status = CheckReadable(cert, "certificate"); !status.ok()) return status;
  if (absl::Status status = CheckReadable(key, "key"); !status.ok()) return status;
  auto context = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  context->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                       asio::ssl::context::no_tlsv1_1);
  error_code ec;
  context->use_certificate_chain_file(cert, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS certificate file ", cert, " is not a PEM certificate: ", ec.message()));
  }
  context->use_private_key_file(key, asio::ssl::context::pem, ec);
  if (ec) {
    return absl::InvalidArgumentError(absl::StrCat("TLS key file ", key, " is not a PEM private key matching ",
                                                   cert, ": ", ec.message()));
  }
  if (SSL_CTX_check_private_key(context->native_handle()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("TLS key file ", key, " does not match certificate ", cert));
  }
  return context;
}

absl::StatusOr<tcp::endpoint> Resolve(asio::io_context& io, const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("HTTP address \"", address, "\" is not host:port"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";
  tcp::resolver resolver(io);
  error_code ec;
  auto results = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
  if (ec || results.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve HTTP address ", address, ": ", ec ? ec.message() : "no address"));
  }
  return results.begin()->endpoint();
}

HttpResponse HandlerFailed(const std::string& message) {
  HttpResponse response;
  response.status = 500;
  response.body = JsonError(message);
  return response;
}

}  // namespace

// The server proper: the io threads, the acceptor, and the registry of connections (for the connection limit,
// eviction and Stop). Lock order: stop_mu_ before mu_. mu_ is never held while a connection's code runs
// (connections are only posted to under it) nor while a callback runs.
class HttpServer::Impl : public HttpConnectionHost {
 public:
  Impl(const HttpServerOptions& options, HttpHandler handler)
      : options_(options),
        handler_(std::move(handler)),
        work_(asio::make_work_guard(io_)),
        acceptor_(asio::make_strand(io_)),
        accept_retry_(acceptor_.get_executor()) {}

  absl::Status Listen() {
    if (options_.threads < 1 || options_.limits.max_connections < 1 || options_.limits.max_header_bytes < 1 ||
        options_.limits.max_body_bytes < 0) {
      return absl::InvalidArgumentError("HTTP server options: threads, max_connections and max_header_bytes must "
                                        "be positive, max_body_bytes not negative");
    }
    if (!options_.tls_cert_path.empty() || !options_.tls_key_path.empty()) {
      absl::StatusOr<std::unique_ptr<asio::ssl::context>> tls =
          MakeTlsContext(options_.tls_cert_path, options_.tls_key_path);
      if (!tls.ok()) return tls.status();
      tls_ = std::move(*tls);
    }
    absl::StatusOr<tcp::endpoint> endpoint = Resolve(io_, options_.address);
    if (!endpoint.ok()) return endpoint.status();
    RaiseFileLimit();
    error_code ec;
    acceptor_.open(endpoint->protocol(), ec);
    // SO_REUSEADDR (not SO_REUSEPORT): a restart may bind over TIME_WAIT leftovers, but a second live listener
    // on the same port still fails with "address already in use".
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(*endpoint, ec);
    if (!ec) acceptor_.listen(kListenBacklog, ec);
    if (ec) {
      return absl::UnavailableError(absl::StrCat("cannot listen for HTTP on ", options_.address, ": ",
                                                 absl::AsciiStrToLower(ec.message())));
    }
    port_ = acceptor_.local_endpoint(ec).port();
    Accept();
    for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this] { io_.run(); });
    return absl::OkStatus();
  }

  int port() const { return port_; }
  int open_connections() const { return open_.load(); }

  void Stop(absl::Duration grace) {
    MutexLock stop_lock(&stop_mu_);
    if (threads_.empty()) return;
    asio::post(acceptor_.get_executor(), [this] {
      stopping_ = true;
      error_code ignored;
      acceptor_.close(ignored);
      accept_retry_.cancel();
    });
    {
      // From here Admit closes new sockets at once, so the snapshots below see every connection there will be.
      MutexLock lock(&mu_);
      closing_ = true;
    }
    for (const auto& connection : Snapshot()) connection->BeginDrain();
    const absl::Time deadline = absl::Now() + grace;
    {
      MutexLock lock(&mu_);
      while (open_.load() > 0 && absl::Now() < deadline) changed_.WaitUntil(&mu_, deadline);
    }
    for (const auto& connection : Snapshot()) connection->Abort();
    {
      // Every socket and timer must be destroyed before the io_context is. Connections die as soon as their
      // aborted operations have completed; exchanges only hold them weakly.
      MutexLock lock(&mu_);
      while (live_ > 0) changed_.Wait(&mu_);
    }
    work_.reset();
    io_.stop();
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
  }

  // HttpConnectionHost.
  const HttpLimits& limits() const override { return options_.limits; }

  void Handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) override {
    try {
      handler_(std::move(request), exchange);
    } catch (const std::exception& e) {
      exchange->Respond(HandlerFailed(absl::StrCat("request handler failed: ", e.what())));
    } catch (...) {
      exchange->Respond(HandlerFailed("request handler failed"));
    }
  }

  void ConnectionClosed(uint64_t id) override {
    std::shared_ptr<HttpConnection> released;  // destroyed after the lock is released
    {
      MutexLock lock(&mu_);
      auto it = registry_.find(id);
      if (it != registry_.end()) {
        if (it->second.admitted) --admitted_;
        released = std::move(it->second.connection);
        registry_.erase(it);
      }
      open_.fetch_sub(1);
    }
    changed_.SignalAll();
  }

  void ConnectionDestroyed() override {
    // Signalled under mu_: Stop() returns (and the server may be destroyed, changed_ with it) as soon as it sees
    // live_ == 0, so once mu_ is released this thread must not touch the server (TSan caught a SignalAll running
    // while the destructor destroyed changed_).
    MutexLock lock(&mu_);
    --live_;
    changed_.SignalAll();
  }

 private:
  struct Entry {
    std::shared_ptr<HttpConnection> connection;  // keeps it alive while it waits with no operation pending
    bool admitted = false;  // counts against max_connections (not a 503 rejection, not being evicted)
  };

  void Accept() {
    acceptor_.async_accept(asio::make_strand(io_), [this](const error_code& ec, tcp::socket socket) {
      if (stopping_ || ec == asio::error::operation_aborted) return;
      if (ec) {
        accept_retry_.expires_after(kAcceptRetryDelay);
        accept_retry_.async_wait([this](const error_code& wait_ec) {
          if (!wait_ec && !stopping_) Accept();
        });
        return;
      }
      error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);  // responses and SSE events go out without Nagle's delay
      Admit(std::move(socket));
      Accept();
    });
  }

  void Admit(tcp::socket socket) {
    std::shared_ptr<HttpConnection> connection;
    bool admitted = false;
    {
      MutexLock lock(&mu_);
      if (closing_) {
        error_code ignored;
        socket.close(ignored);
        return;
      }
      const uint64_t id = next_id_++;
      ++live_;  // before the connection exists: its destructor decrements
      connection = std::make_shared<HttpConnection>(id, std::move(socket), tls_.get(), this);
      if (admitted_ >= options_.limits.max_connections) EvictOldestWaitingLocked();
      admitted = admitted_ < options_.limits.max_connections;
      if (admitted) ++admitted_;
      registry_[id] = Entry{connection, admitted};
      open_.fetch_add(1);
    }
    if (admitted) {
      connection->Start();
    } else {
      connection->StartRejecting(absl::StrCat("the server is at its limit of ", options_.limits.max_connections,
                                              " connections, all busy"));
    }
  }

  // The registry is ordered by id, i.e. by age: the first evictable entry is the oldest idle (or still sending
  // its head) connection. TryEvict only posts, so calling it under mu_ runs none of the connection's code here.
  void EvictOldestWaitingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto& [id, entry] : registry_) {
      if (entry.admitted && entry.connection->TryEvict()) {
        entry.admitted = false;
        --admitted_;
        return;
      }
    }
  }

  std::vector<std::shared_ptr<HttpConnection>> Snapshot() {
    MutexLock lock(&mu_);
    std::vector<std::shared_ptr<HttpConnection>> connections;
    connections.reserve(registry_.size());
    for (const auto& [id, entry] : registry_) connections.push_back(entry.connection);
    return connections;
  }

  const HttpServerOptions options_;
  const HttpHandler handler_;
  std::unique_ptr<asio::ssl::context> tls_;  // null: plain HTTP
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  tcp::acceptor acceptor_;          // used on its own strand only
  asio::steady_timer accept_retry_;  // same strand
  bool stopping_ = false;           // same strand
  int port_ = 0;
  std::vector<std::thread> threads_;  // written by Listen and Stop (the owning thread) only
  std::atomic<int> open_{0};

  Mutex stop_mu_;  // serialises Stop calls
  Mutex mu_;
  CondVar changed_;  // signalled when a connection closes or is destroyed
  std::map<uint64_t, Entry> registry_ ABSL_GUARDED_BY(mu_);
  bool closing_ ABSL_GUARDED_BY(mu_) = false;  // Stop has begun
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  int admitted_ ABSL_GUARDED_BY(mu_) = 0;
  int live_ ABSL_GUARDED_BY(mu_) = 0;  // HttpConnection objects not yet destroyed
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              HttpHandler handler) {
  auto impl = std::make_unique<Impl>(options, std::move(handler));
  if (absl::Status status = impl->Listen(); !status.ok()) return status;
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() { Stop(); }
int HttpServer::port() const { return impl_->port(); }
void HttpServer::Stop(absl::Duration grace) { impl_->Stop(grace); }
int HttpServer::open_connections() const { return impl_->open_connections(); }

}  // namespace sluice
