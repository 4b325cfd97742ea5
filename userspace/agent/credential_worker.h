// The credentials of attached sandboxes the agent holds (README
// "Credentials"), and the thread that runs their programs: issue and revoke
// programs may each take up to 30 s, so refreshes, expiries, pending revokes
// and the sweep of what dead cordon processes left run here, one job at a
// time in order, off the agent's event loop. Their events are queued for the
// loop to deliver.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "event.pb.h"
#include "ops/credentials.h"

namespace cordon::agent {

// One attached sandbox's credentials. `mu` is held by whoever runs one of
// their programs (the worker; the loop only to end them, at detach).
struct HeldCredentials {
  std::mutex mu;
  std::shared_ptr<ops::SandboxCredentials> creds;  // null once ended or released
  std::atomic<bool> queued{false};                 // a job for them waits or runs
  // What their events name (the sandbox's names, as its other events).
  std::string name, policy, cgroup_path;
  uint64_t id = 0;
  void Name(cordon::v1::AuditEvent* e) const {
    e->set_sandbox(name);
    e->set_policy(policy);
    e->set_cgroup_path(cgroup_path);
    e->set_cgroup_id(id);
    e->set_sandbox_cgroup_id(id);
  }
};

class CredentialWorker {
 public:
  using Job = std::function<void(const ops::CredentialEvents& emit)>;
  // `name`: its thread's name (at most 15 bytes; what `top -H`, `ps -L` and
  // /proc/PID/task/TID/comm show).
  explicit CredentialWorker(std::string name);
  // Finishes the job in progress (a program runs to its end or its 30 s);
  // drops the ones still queued.
  ~CredentialWorker();
  void Stop();  // the same, now; events and logs stay to be taken
  CredentialWorker(const CredentialWorker&) = delete;
  CredentialWorker& operator=(const CredentialWorker&) = delete;

  void Post(Job job);
  // The events the jobs emitted since the last call, in order.
  std::vector<cordon::v1::AuditEvent> TakeEvents();
  // Log lines the jobs left (the loop logs them).
  std::vector<std::string> TakeLogs();
  void Log(std::string line);
  size_t Pending();  // queued or running

 private:
  void Run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool running_ = false, stop_ = false;
  std::vector<cordon::v1::AuditEvent> events_;
  std::vector<std::string> logs_;
  std::string name_;
  std::thread thread_;
};

}  // namespace cordon::agent
