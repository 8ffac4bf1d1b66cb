// DeliveryLane: one thread that runs posted work in the order it was posted. The continuous batcher gives each
// instance one, and hands it every client callback of that instance's sequences (on_token, on_done), so that
// detokenizing, stop-string matching and writing to the transport overlap the next device step instead of
// delaying it, and the engine thread never runs client code.
//
// Post(work, max_queued) first waits while more than max_queued posts are queued and not yet started: the engine
// bounds how far delivery may lag behind it (and so how many steps it may compute for a sequence whose client
// already said stop), without ever waiting for the post that is running.
//
// Thread-safety: Post() is safe from any thread, never from inside posted work with a bound (it could wait for
// itself). The destructor runs what is queued, then joins the thread.
#pragma once

#include <deque>
#include <functional>
#include <thread>

#include "backend/base/sync.h"

namespace sluice {

class DeliveryLane {
 public:
  DeliveryLane();
  DeliveryLane(const DeliveryLane&) = delete;
  DeliveryLane& operator=(const DeliveryLane&) = delete;
  ~DeliveryLane();

  void Post(std::function<void()> work, int max_queued = kUnbounded);

  static constexpr int kUnbounded = -1;

 private:
  void Run();

  Mutex mu_;
  CondVar posted_;  // work queued, or closing
  CondVar taken_;   // a post left the queue
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace sluice
