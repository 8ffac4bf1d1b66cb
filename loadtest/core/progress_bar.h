// A one-line progress display on a terminal: a thread redraws `render()` on stderr every 250 ms with '\r';
// nothing at all when stderr is not a terminal (or when disabled), so logs and pipes stay clean.
// Thread-safety: Start/Stop from one owner thread; `render` runs on the bar's thread and must be thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace sluice::loadtest {

class ProgressBar {
 public:
  ProgressBar(std::function<std::string()> render, bool enabled);
  ~ProgressBar();  // Stop()s

  // Ends the display (clears the line).
  void Stop();

  // "[#######.........]" of `width` cells for fraction in [0, 1].
  static std::string Bar(double fraction, int width);

  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

 private:
  std::function<std::string()> render_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace sluice::loadtest
