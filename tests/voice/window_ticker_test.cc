// WindowTicker (server/voice/window_ticker.h): every registered callback runs at each tick, one after another;
// Unregister waits for a running callback and none runs after it; Stop ends the ticks.
#include "server/voice/window_ticker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <thread>

namespace sluice::voice {
namespace {

// Polls (10 s at most) until `done` holds.
template <typename F>
bool Eventually(F done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(WindowTickerTest, EveryRegisteredCallbackRunsAtEachTick) {
  WindowTicker ticker(absl::Milliseconds(10));
  std::atomic<int> a{0}, b{0};
  ticker.Register([&] { ++a; });
  ticker.Register([&] { ++b; });
  ASSERT_TRUE(Eventually([&] { return ticker.ticks() >= 5; }));
  ticker.Stop();
  // Both ran at every tick since they registered (the first tick may have come before the second registered).
  EXPECT_GE(a.load(), 4);
  EXPECT_GE(b.load(), 4);
  EXPECT_LE(std::abs(a.load() - b.load()), 1);
  EXPECT_LE(a.load(), ticker.ticks());
}

TEST(WindowTickerTest, UnregisterWaitsForTheRunningCallbackAndNoneRunsAfter) {
  WindowTicker ticker(absl::Milliseconds(5));
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> calls{0};
  std::atomic<bool> first{true};
  const int64_t id = ticker.Register([&] {
    ++calls;
    if (first.exchange(false)) {
      entered.set_value();
      released.wait();
    }
  });
  entered.get_future().wait();  // the callback is running, blocked
  std::atomic<bool> unregistered{false};
  std::thread unregister([&] {
    ticker.Unregister(id);
    unregistered = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(unregistered.load()) << "Unregister returned while the callback still ran";
  release.set_value();
  unregister.join();
  const int after = calls.load();
  const int64_t ticks = ticker.ticks();
  ASSERT_TRUE(Eventually([&] { return ticker.ticks() >= ticks + 3; }));
  EXPECT_EQ(calls.load(), after);
  ticker.Unregister(id);  // unknown by now: nothing
  ticker.Unregister(12345);
}

TEST(WindowTickerTest, ACallbackMayUnregisterItselfWithoutWaitingForItself) {
  WindowTicker ticker(absl::Milliseconds(5));
  std::atomic<int> calls{0};
  std::promise<int64_t> registered;
  std::shared_future<int64_t> own_id = registered.get_future().share();
  registered.set_value(ticker.Register([&] {
    ++calls;
    ticker.Unregister(own_id.get());  // as a reactor's OnDone would, run inline on this thread
  }));
  ASSERT_TRUE(Eventually([&] { return calls.load() >= 1; }));
  const int64_t ticks = ticker.ticks();
  ASSERT_TRUE(Eventually([&] { return ticker.ticks() >= ticks + 3; }));
  EXPECT_EQ(calls.load(), 1);
}

TEST(WindowTickerTest, StopEndsTheTicksAndIsIdempotent) {
  WindowTicker ticker(absl::Milliseconds(5));
  std::atomic<int> calls{0};
  ticker.Register([&] { ++calls; });
  ASSERT_TRUE(Eventually([&] { return calls.load() >= 2; }));
  ticker.Stop();
  const int after = calls.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(calls.load(), after);
  ticker.Stop();
}

TEST(WindowTickersTest, OneTickerPerModel) {
  WindowTickers tickers;
  WindowTicker* a = tickers.ForModel("a", absl::Milliseconds(480));
  EXPECT_EQ(tickers.ForModel("a", absl::Milliseconds(480)), a);
  EXPECT_NE(tickers.ForModel("b", absl::Milliseconds(160)), a);
  EXPECT_EQ(a->period(), absl::Milliseconds(480));
  tickers.StopAll();
}

}  // namespace
}  // namespace sluice::voice
