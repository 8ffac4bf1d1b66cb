// HttpServer on real loopback sockets. The client is raw POSIX sockets (a tiny response reader below), so every
// byte on the wire is the test's choice: slow heads, floods, bad framing, clients that stop reading or vanish.
// Limits and timeouts are small so that every test ends within a few seconds.

#include "server/http/http_server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

// Under AddressSanitizer (tests/asan/), ResidentKiB() first returns the allocator's quarantine to the system.
#if defined(__SANITIZE_ADDRESS__)
#define SLUICE_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLUICE_TEST_UNDER_ASAN 1
#endif
#endif
#ifndef SLUICE_TEST_UNDER_ASAN
#define SLUICE_TEST_UNDER_ASAN 0
#endif
#if SLUICE_TEST_UNDER_ASAN
#include <sanitizer/allocator_interface.h>
#endif

namespace sluice {
namespace {

// ---- A minimal HTTP/1.1 client on a blocking socket ----

struct Reply {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// Decodes a complete chunked body starting at `pos`; false while incomplete. `end` is one past it.
bool DecodeChunked(const std::string& data, size_t pos, std::string* body, size_t* end) {
  body->clear();
  for (;;) {
    const size_t line_end = data.find("\r\n", pos);
    if (line_end == std::string::npos) return false;
    const size_t size = std::stoul(data.substr(pos, line_end - pos), nullptr, 16);
    if (data.size() < line_end + 2 + size + 2) return false;
    if (size == 0) {
      *end = line_end + 4;  // no trailers from our server
      return true;
    }
    body->append(data, line_end + 2, size);
    pos = line_end + 2 + size + 2;
  }
}

class Client {
 public:
  explicit Client(int port, int receive_buffer = 0) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (receive_buffer > 0) setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  }
  ~Client() { close(fd_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool connected() const { return connected_; }
  // Half-close: no more bytes from us, but the connection stays open for reading.
  bool ShutdownWrite() { return shutdown(fd_, SHUT_WR) == 0; }

  bool Send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t sent = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (sent <= 0) return false;
      data.remove_prefix(static_cast<size_t>(sent));
    }
    return true;
  }

  // One response (a 1xx one too); nullopt if the connection ends or `timeout` passes first.
  std::optional<Reply> Read(absl::Duration timeout = absl::Seconds(5)) {
    const absl::Time deadline = absl::Now() + timeout;
    for (;;) {
      if (std::optional<Reply> reply = TryParse(); reply.has_value()) return reply;
      if (!Fill(deadline)) return closed_ ? TryParseUntilClose() : std::nullopt;
    }
  }

  // The next final (>= 200) response, skipping interim 1xx ones; nullopt as Read.
  std::optional<Reply> ReadFinal(absl::Duration timeout = absl::Seconds(5)) {
    for (;;) {
      std::optional<Reply> reply = Read(timeout);
      if (!reply.has_value() || reply->status >= 200) return reply;
    }
  }

  // True once the server has closed the connection (EOF or reset), discarding what arrives first.
  bool WaitClosed(absl::Duration timeout = absl::Seconds(5)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (!closed_) {
      if (!Fill(deadline)) break;
    }
    return closed_;
  }

  // Reads until what was received ends with `suffix` (true) or `timeout` passes.
  bool ReadUntilEndsWith(std::string_view suffix, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (!std::string_view(buffer_).ends_with(suffix)) {
      if (!Fill(deadline)) return false;
    }
    return true;
  }
  std::string& buffer() { return buffer_; }

 private:
  bool Fill(absl::Time deadline) {
    if (closed_) return false;
    pollfd p{fd_, POLLIN, 0};
    const int64_t wait_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (wait_ms <= 0 || poll(&p, 1, static_cast<int>(wait_ms)) <= 0) return false;
    char chunk[65536];
    const ssize_t got = recv(fd_, chunk, sizeof(chunk), 0);
    if (got <= 0) {
      closed_ = true;
      return false;
    }
    buffer_.append(chunk, static_cast<size_t>(got));
    return true;
  }

  std::optional<Reply> TryParse(bool at_close = false) {
    const size_t head_end = buffer_.find("\r\n\r\n");
    if (head_end == std::string::npos) return std::nullopt;
    Reply reply;
    reply.status = std::atoi(buffer_.c_str() + buffer_.find(' ') + 1);
    size_t line = buffer_.find("\r\n") + 2;
    while (line < head_end) {
      const size_t line_end = buffer_.find("\r\n", line);
      const size_t colon = buffer_.find(':', line);
      reply.headers[Lower(buffer_.substr(line, colon - line))] = buffer_.substr(colon + 2, line_end - colon - 2);
      line = line_end + 2;
    }
    size_t end = head_end + 4;
    if (reply.status >= 200) {
      if (reply.headers.count("content-length")) {
        const size_t length = std::stoul(reply.Header("content-length"));
        if (buffer_.size() < end + length) return std::nullopt;
        reply.body = buffer_.substr(end, length);
        end += length;
      } else if (reply.Header("transfer-encoding") == "chunked") {
        if (!DecodeChunked(buffer_, end, &reply.body, &end)) return std::nullopt;
      } else {
        if (!at_close) return std::nullopt;  // the body ends at close
        reply.body = buffer_.substr(end);
        end = buffer_.size();
      }
    }
    buffer_.erase(0, end);
    return reply;
  }
  std::optional<Reply> TryParseUntilClose() { return TryParse(/*at_close=*/true); }

  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
  std::string buffer_;
};

std::string Get(const std::string& path, const std::string& extra = "") {
  return absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: test\r\n", extra, "\r\n");
}
std::string Post(const std::string& path, const std::string& body, const std::string& extra = "") {
  return absl::StrCat("POST ", path, " HTTP/1.1\r\nHost: test\r\nContent-Length: ", body.size(), "\r\n", extra,
                      "\r\n", body);
}

HttpResponse Text(std::string body, int status = 200) {
  HttpResponse response;
  response.status = status;
  response.content_type = "text/plain";
  response.body = std::move(body);
  return response;
}

// Answers at once with the method, path and body.
void Echo(HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
  exchange->Respond(Text(absl::StrCat(request.method, " ", request.path, " ", request.body)));
}

HttpLimits TestLimits() {
  HttpLimits limits;
  limits.max_header_bytes = 4096;
  limits.max_body_bytes = 1 << 20;
  limits.header_timeout = absl::Seconds(2);
  limits.body_timeout = absl::Seconds(2);
  limits.idle_timeout = absl::Seconds(5);
  limits.write_timeout = absl::Seconds(5);
  return limits;
}

std::unique_ptr<HttpServer> StartServer(HttpHandler handler, HttpLimits limits = TestLimits()) {
  HttpServerOptions options;
  options.address = "127.0.0.1:0";
  options.limits = limits;
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(options, std::move(handler));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

// Polls `condition` until it holds or `timeout` passes.
template <class Condition>
bool Eventually(Condition condition, absl::Duration timeout = absl::Seconds(3)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

int64_t ResidentKiB() {
#if SLUICE_TEST_UNDER_ASAN
  // ASan keeps freed memory in quarantine (and never reuses it at once), so RSS would count every buffer the server
  // ever freed; hand it back first so that RSS reflects what is live, as without ASan.
  __sanitizer_purge_allocator();
#endif
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return 0;
}

// Threads a test's handler starts; joined before the server goes away.
class Workers {
 public:
  ~Workers() { Join(); }
  template <class F>
  void Run(F f) {
    std::lock_guard<std::mutex> lock(mu_);
    threads_.emplace_back(std::move(f));
  }
  void Join() {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      threads.swap(threads_);
    }
    for (std::thread& thread : threads) thread.join();
  }

 private:
  std::mutex mu_;
  std::vector<std::thread> threads_;
};

// ---- Basic exchanges ----

TEST(HttpServerTest, AnswersLaterFromAnotherThread) {
  Workers workers;
  auto server = StartServer([&](HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
    workers.Run([exchange] {
      absl::SleepFor(absl::Milliseconds(150));
      exchange->Respond(Text("late"));
    });
  });
  Client client(server->port());
  const absl::Time start = absl::Now();
  ASSERT_TRUE(client.Send(Get("/slow")));
  std::optional<Reply> reply = client.Read();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(reply->body, "late");
  EXPECT_EQ(reply->Header("content-type"), "text/plain");
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(140));
  workers.Join();
}

TEST(HttpServerTest, KeepAliveServesManyRequestsOnOneConnection) {
  auto server = StartServer(Echo);
  Client client(server->port());
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(client.Send(Post(absl::StrCat("/r/", i), absl::StrCat("body", i))));
    std::optional<Reply> reply = client.Read();
    ASSERT_TRUE(reply.has_value()) << i;
    EXPECT_EQ(reply->body, absl::StrCat("POST /r/", i, " body", i));
    EXPECT_EQ(reply->Header("connection"), "");  // HTTP/1.1 keeps the connection by default
  }
  EXPECT_EQ(server->open_connections(), 1);
}

TEST(HttpServerTest, PipelinedRequestsAreAnsweredInOrder) {
  auto server = StartServer(Echo);
  Client client(server->port());
  ASSERT_TRUE(client.Send(Get("/a?x=1") + Post("/b", "xyz") + Get("/c")));
  for (const char* expected : {"GET /a ", "POST /b xyz", "GET /c "}) {
    std::optional<Reply> reply = client.Read();
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->body, expected);
  }
}

TEST(HttpServerTest, ConnectionCloseIsHonouredAndHttp10ClosesByDefault) {
  auto server = StartServer(Echo);
  {
    Client client(server->port());
    ASSERT_TRUE(client.Send(Get("/", "Connection: close\r\n")));
    std::optional<Reply> reply = client.Read();
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->Header("connection"), "close");
    EXPECT_TRUE(client.WaitClosed(absl::Seconds(2)));
  }
  {
    Client client(server->port());
    ASSERT_TRUE(client.Send("GET /old HTTP/1.0\r\n\r\n"));
    std::optional<Reply> reply = client.Read();
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->body, "GET /old ");
    EXPECT_TRUE(client.WaitClosed(absl::Seconds(2)));
  }
  {
    Client client(server->port());
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(client.Send("GET /ka HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
      std::optional<Reply> reply = client.Read();
      ASSERT_TRUE(reply.has_value());
      EXPECT_EQ(reply->Header("connection"), "keep-alive");
    }
  }
}

TEST(HttpServerTest, IdleKeepAliveConnectionsCloseAtTheIdleTimeout) {
  HttpLimits limits = TestLimits();
  limits.idle_timeout = absl::Milliseconds(300);
  auto server = StartServer(Echo, limits);
  Client client(server->port());
  ASSERT_TRUE(client.Send(Get("/")));
  ASSERT_TRUE(client.Read().has_value());
  const absl::Time start = absl::Now();
  EXPECT_TRUE(client.WaitClosed(absl::Seconds(2)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(250));
  EXPECT_TRUE(Eventually([&] { return server->open_connections() == 0; }));
}

TEST(HttpServerTest, TheLastRequestAllowedOnAConnectionIsAnsweredWithConnectionClose) {
  HttpLimits limits = TestLimits();
  limits.max_requests_per_connection = 3;
  auto server = StartServer(Echo, limits);
  Client client(server->port());
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(client.Send(Get("/")));
    std::optional<Reply> reply = client.Read();
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->Header("connection"), i == 3 ? "close" : "") << i;
  }
  EXPECT_TRUE(client.WaitClosed(absl::Seconds(2)));
}

TEST(HttpServerTest, HeadersAreLookedUpCaseInsensitively) {
  std::promise<std::string> seen;
  auto server = StartServer([&](HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
    seen.set_value(std::string(request.Header("x-custom-thing").value_or("missing")));
    HttpResponse response = Text("ok");
    response.headers = {{"X-Reply", "1"}, {"X-Bad", "a\r\nInjected: yes"}};
    exchange->Respond(std::move(response));
  });
  Client client(server->port());
  ASSERT_TRUE(client.Send(Get("/", "X-Custom-THING: value\r\n")));
  std::optional<Reply> reply = client.Read();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(seen.get_future().get(), "value");
  EXPECT_EQ(reply->Header("x-reply"), "1");
  EXPECT_EQ(reply->Header("injected"), "");  // a value with CR/LF is dropped, never sent
}

TEST(HttpServerTest, HandlerThatDropsTheExchangeUnansweredGets500) {
  auto server = StartServer([](HttpRequest, std::shared_ptr<HttpExchange>) {});
  Client client(server->port());
  ASSERT_TRUE(client.Send(Get("/")));
  std::optional<Reply> reply = client.Read(absl::Seconds(2));
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 500);
  EXPECT_NE(reply->body.find("without answering"), std::string::npos);
}

// ---- Hostile and broken clients ----

TEST(HttpServerTest, IdleConnectionsOverTheLimitEvictTheOldestAndFreshClientsAreServedFast) {
  HttpLimits limits = TestLimits();
  limits.max_connections = 1000;
  limits.idle_timeout = absl::Seconds(30);
  limits.header_timeout = absl::Seconds(30);
  auto server = StartServer(Echo, limits);
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 2000; ++i) {
    idle.push_back(std::make_unique<Client>(server->port()));
    ASSERT_TRUE(idle.back()->connected()) << i;
    if (i % 2 == 1) {
      // Half of them have been served once and now sit idle in keep-alive.
      ASSERT_TRUE(idle.back()->Send(Get("/warm")));
      ASSERT_TRUE(idle.back()->Read().has_value()) << i;
    }
  }
  Client fresh(server->port());
  const absl::Time start = absl::Now();
  ASSERT_TRUE(fresh.Send(Get("/fresh")));
  std::optional<Reply> reply = fresh.Read(absl::Seconds(2));
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 200);
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  EXPECT_TRUE(Eventually([&] { return server->open_connections() <= 1000; }));
  EXPECT_TRUE(idle.front()->WaitClosed(absl::Seconds(2)));  // the oldest went first
  ASSERT_TRUE(idle.back()->Send(Get("/newest")));           // the newest still works
  EXPECT_TRUE(idle.back()->Read(absl::Seconds(2)).has_value());
}

TEST(HttpServerTest, WhenEveryConnectionIsBusyANewOneGets503) {
  HttpLimits limits = TestLimits();
  limits.max_connections = 2;
  std::vector<std::shared_ptr<HttpExchange>> held;
  std::mutex mu;
  auto server = StartServer(
      [&](HttpRequest, std::shared_ptr<HttpExchange> exchange) {
        std::lock_guard<std::mutex> lock(mu);
        held.push_back(std::move(exchange));
      },
      limits);
  Client busy1(server->port()), busy2(server->port());
  ASSERT_TRUE(busy1.Send(Get("/hold")));
  ASSERT_TRUE(busy2.Send(Get("/hold")));
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return held.size() == 2;
  }));
  Client third(server->port());
  ASSERT_TRUE(third.Send(Get("/")));
  std::optional<Reply> reply = third.Read(absl::Seconds(2));
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 503);
  EXPECT_EQ(reply->Header("connection"), "close");
  std::lock_guard<std::mutex> lock(mu);
  for (auto& exchange : held) exchange->Respond(Text("done"));
}

TEST(HttpServerTest, SlowHeaderClientsDoNotDelayOthersAndAreClosedAtTheHeaderTimeout) {
  HttpLimits limits = TestLimits();
  limits.header_timeout = absl::Milliseconds(1500);
  auto server = StartServer(Echo, limits);
  std::vector<std::unique_ptr<Client>> slow;
  for (int i = 0; i < 64; ++i) {
    slow.push_back(std::make_unique<Client>(server->port()));
    ASSERT_TRUE(slow.back()->Send("GET /slow HTTP/1.1\r\n"));
  }
  const absl::Time start = absl::Now();
  std::atomic<bool> stop{false};
  std::thread trickler([&] {
    for (int line = 0; !stop.load(); ++line) {
      for (auto& client : slow) client->Send(absl::StrCat("X-Line-", line, ": v\r\n"));
      absl::SleepFor(absl::Milliseconds(200));
    }
  });
  for (int i = 0; i < 10; ++i) {
    Client client(server->port());
    const absl::Time sent = absl::Now();
    ASSERT_TRUE(client.Send(Get("/fast")));
    std::optional<Reply> reply = client.Read(absl::Seconds(1));
    ASSERT_TRUE(reply.has_value()) << i;
    EXPECT_EQ(reply->status, 200);
    EXPECT_LT(absl::Now() - sent, absl::Seconds(1));
    absl::SleepFor(absl::Milliseconds(50));
  }
  for (auto& client : slow) {
    std::optional<Reply> reply = client->Read(absl::Seconds(3));
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->status, 408);
    EXPECT_TRUE(client->WaitClosed(absl::Seconds(1)));
  }
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(1400));
  EXPECT_LT(took, absl::Milliseconds(2800));
  stop = true;
  trickler.join();
  EXPECT_TRUE(Eventually([&] { return server->open_connections() == 0; }));
}

TEST(HttpServerTest, HeaderFloodGets431WithoutBufferingIt) {
  auto server = StartServer(Echo);
  const std::string flood = absl::StrCat("GET / HTTP/1.1\r\nX-Big: ", std::string(1 << 20, 'a'), "\r\n\r\n");
  const int64_t rss_before = ResidentKiB();
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<std::thread> senders;
  for (int i = 0; i < 16; ++i) {
    clients.push_back(std::make_unique<Client>(server->port()));
    senders.emplace_back([&flood, client = clients.back().get()] { client->Send(flood); });
  }
  for (auto& client : clients) {
    std::optional<Reply> reply = client->Read(absl::Seconds(3));
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->status, 431);
    EXPECT_EQ(reply->body, R"({"error":"request header fields are over the limit of 4096 bytes"})");
    EXPECT_EQ(reply->Header("connection"), "close");
  }
  for (std::thread& sender : senders) sender.join();
  // 16 MB were sent; the server keeps at most a head's worth per connection.
  EXPECT_LT(ResidentKiB() - rss_before, 8 << 10);
  Client after(server->port());
  ASSERT_TRUE(after.Send(Get("/after")));
  std::optional<Reply> reply = after.Read(absl::Seconds(1));
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 200);
}

// Found by tests/fuzz/fuzz_http_request: Beast's header_limit bounds the start line and the fields separately, and a
// head of max_header_bytes + 1 bytes was served.
TEST(HttpServerTest, AHeadOfExactlyTheLimitIsServedAndOneByteMoreGets431) {
  auto server = StartServer(Echo);
  auto head_of = [](size_t total) {
    const std::string start = "GET /limit HTTP/1.1\r\nX-Pad: ";
    return absl::StrCat(start, std::string(total - start.size() - 4, 'a'), "\r\n\r\n");
  };
  ASSERT_EQ(head_of(4096).size(), 4096u);
  Client fits(server->port());
  ASSERT_TRUE(fits.Send(head_of(4096)));
  std::optional<Reply> reply = fits.Read(absl::Seconds(3));
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 200);
  Client over(server->port());
  ASSERT_TRUE(over.Send(head_of(4097)));
  reply = over.Read(absl::Seconds(3));
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 431);
  EXPECT_EQ(reply->Header("connection"), "close");
}

TEST(HttpServerTest, MalformedRequestsGet400AtOnce) {
  auto server = StartServer(Echo);
  const std::vector<std::string> requests = {
      "POST / HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
      "POST / HTTP/1.1\r\nContent-Length: 1e12\r\n\r\n",
      "POST / HTTP/1.1\r\nContent-Length: ten\r\n\r\n",
      "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
      "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
      "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
      "NOT A REQUEST LINE AT ALL\r\n\r\n",
      "GET / HTTP/1.1\r\nBad Header Name: x\r\n\r\n",
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
  };
  for (const std::string& request : requests) {
    Client client(server->port());
    const absl::Time start = absl::Now();
    ASSERT_TRUE(client.Send(request));
    std::optional<Reply> reply = client.Read(absl::Seconds(1));
    ASSERT_TRUE(reply.has_value()) << request;
    EXPECT_EQ(reply->status, 400) << request;
    EXPECT_EQ(reply->body.rfind("{\"error\":\"", 0), 0u) << reply->body;
    EXPECT_LT(absl::Now() - start, absl::Seconds(1));
    EXPECT_TRUE(client.WaitClosed(absl::Seconds(2))) << request;
  }
}

TEST(HttpServerTest, BodyOverTheLimitGets413BeforeItIsSent) {
  HttpLimits limits = TestLimits();
  limits.max_body_bytes = 1000;
  std::atomic<int> handled{0};
  auto server = StartServer(
      [&](HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
        ++handled;
        Echo(std::move(request), std::move(exchange));
      },
      limits);
  Client client(server->port());
  const absl::Time start = absl::Now();
  ASSERT_TRUE(client.Send("POST /big HTTP/1.1\r\nContent-Length: 5000\r\n\r\n"));  // and no body
  std::optional<Reply> reply = client.Read(absl::Seconds(1));
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 413);
  EXPECT_EQ(reply->body, R"({"error":"request body of 5000 bytes is over the limit of 1000 bytes"})");
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));

  Client chunked(server->port());
  ASSERT_TRUE(chunked.Send("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n" + std::string(1000, 'x') +
                           "\r\n1\r\ny\r\n0\r\n\r\n"));
  reply = chunked.Read(absl::Seconds(1));
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 413);
  EXPECT_EQ(handled.load(), 0);
}

// RFC 9110 8.6: a list of identical values (as a proxy merging two fields writes it) frames the body as one value;
// a list of different values is refused. Found by fuzz_http_request (regress_content_length_list).
TEST(HttpServerTest, AContentLengthListOfIdenticalValuesFramesTheBodyAndIsLimitedAsOneValue) {
  HttpLimits limits = TestLimits();
  limits.max_body_bytes = 1000;
  auto server = StartServer(Echo, limits);
  Client client(server->port());
  ASSERT_TRUE(client.Send("POST /l HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\nhello"
                          "POST /m HTTP/1.1\r\nContent-Length: 2\r\n\r\nok"));
  std::optional<Reply> reply = client.Read(absl::Seconds(1));
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->body, "POST /l hello");
  reply = client.Read(absl::Seconds(1));
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->body, "POST /m ok");

  Client over(server->port());
  ASSERT_TRUE(over.Send("POST /big HTTP/1.1\r\nContent-Length: 5000,5000\r\n\r\n"));
  reply = over.Read(absl::Seconds(1));
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 413);
  EXPECT_EQ(reply->body, R"({"error":"request body of 5000 bytes is over the limit of 1000 bytes"})");

  Client conflicting(server->port());
  ASSERT_TRUE(conflicting.Send("POST / HTTP/1.1\r\nContent-Length: 3, 4\r\n\r\nabcd"));
  reply = conflicting.Read(absl::Seconds(1));
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 400);
}

TEST(HttpServerTest, ExpectContinueGets100BeforeTheBody) {
  HttpLimits limits = TestLimits();
  limits.max_body_bytes = 1000;
  auto server = StartServer(Echo, limits);
  Client client(server->port());
  ASSERT_TRUE(client.Send("POST /up HTTP/1.1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
  std::optional<Reply> interim = client.Read(absl::Seconds(1));
  ASSERT_TRUE(interim.has_value());
  EXPECT_EQ(interim->status, 100);
  ASSERT_TRUE(client.Send("hello"));
  std::optional<Reply> reply = client.Read(absl::Seconds(1));
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->body, "POST /up hello");

  // Over the limit: 413 straight away, no 100.
  ASSERT_TRUE(client.Send("POST /up HTTP/1.1\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n"));
  reply = client.Read(absl::Seconds(1));
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 413);
}

TEST(HttpServerTest, ChunkedRequestBodyIsDecoded) {
  auto server = StartServer(Echo);
  Client client(server->port());
  ASSERT_TRUE(client.Send("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"));
  absl::SleepFor(absl::Milliseconds(50));  // the body arrives in pieces
  ASSERT_TRUE(client.Send("1;ext=1\r\n \r\n5\r\nworld\r\n0\r\n\r\n"));
  std::optional<Reply> reply = client.Read();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->body, "POST /c hello world");
}

TEST(HttpServerTest, ClientDisconnectFiresOnClientGone) {
  std::promise<void> gone;
  std::shared_ptr<HttpExchange> kept;
  auto server = StartServer([&](HttpRequest, std::shared_ptr<HttpExchange> exchange) {
    exchange->OnClientGone([&] { gone.set_value(); });
    kept = std::move(exchange);  // answered never: the client leaves first
  });
  {
    Client client(server->port());
    ASSERT_TRUE(client.Send(Get("/wait")));
    ASSERT_TRUE(Eventually([&] { return server->open_connections() == 1; }));
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(gone.get_future().wait_for(std::chrono::seconds(2)), std::future_status::ready);
  ASSERT_NE(kept, nullptr);
  EXPECT_TRUE(kept->client_gone());
  EXPECT_FALSE(kept->Respond(Text("too late")));
  bool ran_at_once = false;
  kept->OnClientGone([&] { ran_at_once = true; });
  EXPECT_TRUE(ran_at_once);
  EXPECT_TRUE(Eventually([&] { return server->open_connections() == 0; }));
}

// A client that half-closes (shutdown(SHUT_WR)) once its request is sent still reads the answer: EOF after a
// complete request means "no more requests", not "gone".
TEST(HttpServerTest, HalfClosedClientGetsTheAnswerThenTheConnectionCloses) {
  Workers workers;
  std::atomic<bool> gone{false};
  auto server = StartServer([&](HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
    exchange->OnClientGone([&] { gone = true; });
    workers.Run([exchange, body = request.body] {
      absl::SleepFor(absl::Milliseconds(200));  // the EOF arrives while the request is being handled
      EXPECT_TRUE(exchange->Respond(Text("answer to " + body)));
    });
  });
  Client client(server->port());
  ASSERT_TRUE(client.Send(Post("/infer", "question")));
  ASSERT_TRUE(client.ShutdownWrite());
  std::optional<Reply> reply = client.ReadFinal();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(reply->body, "answer to question");
  EXPECT_EQ(reply->Header("connection"), "close");
  EXPECT_TRUE(client.WaitClosed());
  EXPECT_FALSE(gone.load());
  workers.Join();
  EXPECT_TRUE(Eventually([&] { return server->open_connections() == 0; }));
}

TEST(HttpServerTest, HalfClosedClientGetsEveryPipelinedAnswerAndAStreamToo) {
  Workers workers;
  auto server = StartServer([&](HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
    if (request.path != "/events") return Echo(std::move(request), std::move(exchange));
    std::shared_ptr<HttpStream> stream = exchange->StartStream(200, "text/event-stream");
    ASSERT_NE(stream, nullptr);
    workers.Run([stream] {
      for (int i = 0; i < 3; ++i) {
        absl::SleepFor(absl::Milliseconds(50));
        stream->Write(absl::StrCat("data: ", i, "\n\n"));
      }
      stream->Close();
    });
  });
  Client client(server->port());
  ASSERT_TRUE(client.Send(Post("/a", "1") + Get("/events") + Post("/b", "2")));
  ASSERT_TRUE(client.ShutdownWrite());
  for (const char* expected : {"POST /a 1", "data: 0\n\ndata: 1\n\ndata: 2\n\n", "POST /b 2"}) {
    std::optional<Reply> reply = client.ReadFinal();
    ASSERT_TRUE(reply.has_value()) << expected;
    EXPECT_EQ(reply->body, expected);
  }
  EXPECT_TRUE(client.WaitClosed());
  workers.Join();
}

TEST(HttpServerTest, HalfCloseInsideAHeadOrBodyClosesWithoutAnAnswer) {
  std::atomic<int> handled{0};
  auto server = StartServer([&](HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
    ++handled;
    Echo(std::move(request), std::move(exchange));
  });
  for (const std::string& partial : {std::string("GET /x HTTP/1.1\r\nHost: t"),
                                     std::string("POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc")}) {
    Client client(server->port());
    ASSERT_TRUE(client.Send(partial));
    ASSERT_TRUE(client.ShutdownWrite());
    EXPECT_TRUE(client.WaitClosed());
    EXPECT_TRUE(client.buffer().empty()) << client.buffer();
  }
  // A complete request followed by an incomplete one: the first is answered, the second never can be.
  Client client(server->port());
  ASSERT_TRUE(client.Send(Get("/done") + "GET /never HTTP/1.1\r\n"));
  ASSERT_TRUE(client.ShutdownWrite());
  std::optional<Reply> reply = client.ReadFinal();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->body, "GET /done ");
  EXPECT_TRUE(client.WaitClosed());
  EXPECT_TRUE(client.buffer().empty()) << client.buffer();
  EXPECT_EQ(handled.load(), 1);
}

TEST(HttpServerTest, HalfClosedHttp10ClientGetsNoInterimResponse) {
  Workers workers;
  auto server = StartServer([&](HttpRequest, std::shared_ptr<HttpExchange> exchange) {
    workers.Run([exchange] {
      absl::SleepFor(absl::Milliseconds(150));
      exchange->Respond(Text("late"));
    });
  });
  Client client(server->port());
  ASSERT_TRUE(client.Send("GET /slow HTTP/1.0\r\n\r\n"));
  ASSERT_TRUE(client.ShutdownWrite());
  std::optional<Reply> reply = client.Read();  // not ReadFinal: a 1xx here would be a failure
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(reply->body, "late");
  EXPECT_TRUE(client.WaitClosed());
  workers.Join();
}

// ---- Streaming ----

TEST(HttpServerTest, StreamSendsChunksInOrderAndKeepsTheConnection) {
  Workers workers;
  auto server = StartServer([&](HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
    if (request.path != "/events") return Echo(std::move(request), std::move(exchange));
    std::shared_ptr<HttpStream> stream = exchange->StartStream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
    ASSERT_NE(stream, nullptr);
    EXPECT_EQ(exchange->StartStream(200, "text/plain"), nullptr);  // only once
    EXPECT_FALSE(exchange->Respond(Text("no")));
    workers.Run([stream] {
      for (int i = 0; i < 100; ++i) stream->Write(absl::StrCat("data: ", i, "\n\n"));
      stream->Close();
      EXPECT_FALSE(stream->Write("after close"));
    });
  });
  Client client(server->port());
  ASSERT_TRUE(client.Send(Get("/events")));
  std::optional<Reply> reply = client.Read();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->Header("content-type"), "text/event-stream");
  EXPECT_EQ(reply->Header("transfer-encoding"), "chunked");
  EXPECT_EQ(reply->Header("cache-control"), "no-cache");
  std::string expected;
  for (int i = 0; i < 100; ++i) expected += absl::StrCat("data: ", i, "\n\n");
  EXPECT_EQ(reply->body, expected);
  ASSERT_TRUE(client.Send(Get("/next")));
  reply = client.Read();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->body, "GET /next ");
  workers.Join();
}

TEST(HttpServerTest, StreamBackpressureBuffersWhileTheClientDoesNotReadAndResumesWhenItDoes) {
  std::promise<std::shared_ptr<HttpStream>> started;
  auto server = StartServer([&](HttpRequest, std::shared_ptr<HttpExchange> exchange) {
    started.set_value(exchange->StartStream(200, "application/octet-stream"));
  });
  Client client(server->port(), /*receive_buffer=*/16 << 10);
  ASSERT_TRUE(client.Send(Get("/bulk")));
  std::shared_ptr<HttpStream> stream = started.get_future().get();
  const std::string chunk(64 << 10, 'z');
  constexpr size_t kHighWater = 1 << 20;
  size_t written = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  // The client reads nothing: the socket buffers fill (loopback takes a few MB), then the stream's own buffer
  // grows. Writes are handed to an io thread, so the buffer must stay high after a pause, not just peak.
  for (;;) {
    while (stream->buffered_bytes() <= kHighWater && written < (256u << 20)) {
      ASSERT_TRUE(stream->Write(chunk));
      written += chunk.size();
    }
    absl::SleepFor(absl::Milliseconds(100));
    if (stream->buffered_bytes() > kHighWater || absl::Now() > deadline) break;
  }
  ASSERT_GT(stream->buffered_bytes(), kHighWater);
  std::promise<void> writable;
  std::future<void> writable_future = writable.get_future();
  stream->OnWritable(64 << 10, [&] { writable.set_value(); });
  EXPECT_EQ(writable_future.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  std::atomic<bool> complete{false};
  std::thread reader([&] { complete = client.ReadUntilEndsWith("\r\n0\r\n\r\n", absl::Seconds(5)); });
  EXPECT_EQ(writable_future.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  stream->Close();
  reader.join();
  ASSERT_TRUE(complete.load());
  std::string body;
  size_t end = 0;
  const size_t head_end = client.buffer().find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos);
  ASSERT_TRUE(DecodeChunked(client.buffer(), head_end + 4, &body, &end));
  EXPECT_EQ(body.size(), written);
  EXPECT_EQ(stream->buffered_bytes(), 0u);
}

// ---- Listening, TLS, Stop ----

TEST(HttpServerTest, SecondServerOnTheSamePortFails) {
  auto first = StartServer(Echo);
  HttpServerOptions options;
  options.address = absl::StrCat("127.0.0.1:", first->port());
  absl::StatusOr<std::unique_ptr<HttpServer>> second = HttpServer::Start(options, Echo);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("in use"), std::string::npos) << second.status();
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / absl::StrCat("sluice_http_tls_", getpid());
    std::filesystem::create_directories(dir_);
    for (const char* name : {"a", "b"}) {
      const std::string command = absl::StrCat(
          "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -keyout ", Path(name), ".key",
          " -out ", Path(name), ".crt >/dev/null 2>&1");
      ASSERT_EQ(std::system(command.c_str()), 0) << command;
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  absl::StatusOr<std::unique_ptr<HttpServer>> StartTls(const std::string& cert, const std::string& key) {
    HttpServerOptions options;
    options.address = "127.0.0.1:0";
    options.tls_cert_path = cert;
    options.tls_key_path = key;
    return HttpServer::Start(options, Echo);
  }

  std::filesystem::path dir_;
};

TEST_F(TlsTest, ServesHttpsWithAGeneratedCertificate) {
  absl::StatusOr<std::unique_ptr<HttpServer>> server = StartTls(Path("a.crt"), Path("a.key"));
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string command = absl::StrCat(
      "printf 'POST /tls HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 6\\r\\nConnection: close\\r\\n\\r\\nsecret' | "
      "timeout 10 openssl s_client -quiet -connect 127.0.0.1:", (*server)->port(), " 2>/dev/null");
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  for (size_t got; (got = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) output.append(buffer, got);
  pclose(pipe);
  EXPECT_EQ(output.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << output;
  EXPECT_NE(output.find("POST /tls secret"), std::string::npos) << output;

  // Plain HTTP to the TLS port gets no answer but a closed connection, not a hang.
  Client plain((*server)->port());
  ASSERT_TRUE(plain.Send(Get("/")));
  EXPECT_TRUE(plain.WaitClosed(absl::Seconds(3)));
}

TEST_F(TlsTest, BadTlsFilesAreRefusedAtStartNamingTheFile) {
  absl::StatusOr<std::unique_ptr<HttpServer>> server = StartTls(Path("missing.crt"), Path("a.key"));
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find(Path("missing.crt")), std::string::npos) << server.status();

  std::ofstream(Path("garbage.crt")) << "this is not a certificate\n";
  server = StartTls(Path("garbage.crt"), Path("a.key"));
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find(Path("garbage.crt")), std::string::npos) << server.status();
  EXPECT_NE(server.status().message().find("not a PEM certificate"), std::string::npos) << server.status();

  server = StartTls(Path("a.crt"), Path("b.key"));  // a key of another certificate
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find(Path("b.key")), std::string::npos) << server.status();

  server = StartTls(Path("a.crt"), "");
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HttpServerTest, StopAnswersInProgressExchangesWithinTheGraceThenClosesTheRest) {
  Workers workers;
  std::promise<void> abandoned_gone;
  std::vector<std::shared_ptr<HttpExchange>> abandoned;
  auto server = StartServer([&](HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
    if (request.path == "/never") {
      exchange->OnClientGone([&] { abandoned_gone.set_value(); });
      abandoned.push_back(std::move(exchange));
      return;
    }
    workers.Run([exchange] {
      absl::SleepFor(absl::Milliseconds(200));
      exchange->Respond(Text("finished"));
    });
  });
  Client answered(server->port()), never(server->port()), idle(server->port());
  ASSERT_TRUE(answered.Send(Get("/soon")));
  ASSERT_TRUE(never.Send(Get("/never")));
  ASSERT_TRUE(Eventually([&] { return server->open_connections() == 3; }));
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time start = absl::Now();
  server->Stop(absl::Milliseconds(700));
  const absl::Duration took = absl::Now() - start;
  EXPECT_LT(took, absl::Milliseconds(1500));
  EXPECT_EQ(server->open_connections(), 0);
  std::optional<Reply> reply = answered.Read(absl::Seconds(1));
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->body, "finished");
  EXPECT_EQ(reply->Header("connection"), "close");
  EXPECT_TRUE(never.WaitClosed(absl::Seconds(1)));
  EXPECT_TRUE(idle.WaitClosed(absl::Seconds(1)));
  EXPECT_EQ(abandoned_gone.get_future().wait_for(std::chrono::seconds(0)), std::future_status::ready);
  server->Stop();  // idempotent
  workers.Join();
  EXPECT_FALSE(abandoned.front()->Respond(Text("after stop")));  // the server is gone: ignored, no crash
}


}  // namespace
}  // namespace sluice
