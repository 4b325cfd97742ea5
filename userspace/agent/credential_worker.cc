#include "agent/credential_worker.h"

#include <pthread.h>

namespace cordon::agent {

CredentialWorker::CredentialWorker(std::string name)
    : name_(std::move(name)), thread_([this] {
        ::pthread_setname_np(::pthread_self(), name_.substr(0, 15).c_str());
        Run();
      }) {}

CredentialWorker::~CredentialWorker() { Stop(); }

void CredentialWorker::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    jobs_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CredentialWorker::Post(Job job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

std::vector<cordon::v1::AuditEvent> CredentialWorker::TakeEvents() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<cordon::v1::AuditEvent> out;
  out.swap(events_);
  return out;
}

std::vector<std::string> CredentialWorker::TakeLogs() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  out.swap(logs_);
  return out;
}

void CredentialWorker::Log(std::string line) {
  std::lock_guard<std::mutex> lock(mu_);
  logs_.push_back(std::move(line));
}

size_t CredentialWorker::Pending() {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_.size() + (running_ ? 1 : 0);
}

void CredentialWorker::Run() {
  const ops::CredentialEvents emit = [this](cordon::v1::AuditEvent e) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(e));
  };
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      running_ = false;
      cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
      running_ = true;
    }
    job(emit);
  }
}

}  // namespace cordon::agent
