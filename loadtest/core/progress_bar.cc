#include "loadtest/core/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace sluice::loadtest {

ProgressBar::ProgressBar(std::function<std::string()> render, bool enabled) : render_(std::move(render)) {
  if (!enabled || !::isatty(STDERR_FILENO)) return;
  thread_ = std::thread([this] {
    while (!stop_.load()) {
      std::fprintf(stderr, "\r%s\033[K", render_().c_str());
      std::fflush(stderr);
      for (int i = 0; i < 5 && !stop_.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  });
}

ProgressBar::~ProgressBar() { Stop(); }

void ProgressBar::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

std::string ProgressBar::Bar(double fraction, int width) {
  const int filled = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * width);
  return "[" + std::string(filled, '#') + std::string(width - filled, '.') + "]";
}

}  // namespace sluice::loadtest
