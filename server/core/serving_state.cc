#include "server/core/serving_state.h"

namespace sluice {

AdmittedCall& AdmittedCall::operator=(AdmittedCall&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr) state_->Leave();
    state_ = std::exchange(other.state_, nullptr);
  }
  return *this;
}

AdmittedCall::~AdmittedCall() {
  if (state_ != nullptr) state_->Leave();
}

AdmittedCall ServingState::Admit() {
  MutexLock lock(&mu_);
  if (draining_.load()) return AdmittedCall();
  ++admitted_;
  return AdmittedCall(this);
}

void ServingState::Leave() {
  MutexLock lock(&mu_);
  if (--admitted_ == 0) left_.SignalAll();
}

void ServingState::WaitForAdmittedCalls() {
  MutexLock lock(&mu_);
  while (admitted_ > 0) left_.Wait(&mu_);
}

int64_t ServingState::admitted_calls() const {
  MutexLock lock(&mu_);
  return admitted_;
}

}  // namespace sluice
