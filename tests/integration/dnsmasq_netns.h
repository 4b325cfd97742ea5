// A real DNS server for the egress-by-name tests: Debian's dnsmasq on
// 127.0.0.1:53 in a network namespace the test creates (loopback only), with
// the host records the test gives, logging every query it gets (the proof
// of what left cordon's resolver). The calling thread enters the namespace
// and stays there until Stop(): what it starts (cordon run, listeners) runs
// there too. Addresses added to the namespace's loopback stand for the
// servers the names point at.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "tests/integration/harness.h"

namespace cordon::test {

class DnsmasqNetns {
 public:
  // `tag`: part of the namespace's and directory's names; `options`: more
  // dnsmasq options (--host-record=..., --cname=...); `addresses`: added to
  // the namespace's loopback ("93.184.216.34/32", "2606:2800:220:1::1/128").
  // Fails the test (fatally) if anything does not come up.
  void Start(const std::string& tag, const std::vector<std::string>& options,
             const std::vector<std::string>& addresses = {}) {
    ASSERT_EQ(::access("/usr/sbin/dnsmasq", X_OK), 0) << "dnsmasq-base is not installed (setup.sh)";
    dir_ = "/tmp/cordon-" + tag + "-" + std::to_string(::getpid());
    ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0) << dir_;
    netns_ = "cordon-" + tag + "-" + std::to_string(::getpid());
    ASSERT_EQ(Run({"ip", "netns", "add", netns_}).status, 0);
    ASSERT_EQ(Run({"ip", "-n", netns_, "link", "set", "lo", "up"}).status, 0);
    for (const auto& a : addresses) ASSERT_EQ(Run({"ip", "-n", netns_, "addr", "add", a, "dev", "lo"}).status, 0) << a;
    original_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    const int ns = ::open(("/run/netns/" + netns_).c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(ns, 0);
    ASSERT_EQ(::setns(ns, CLONE_NEWNET), 0);  // this thread, and what it starts, in the namespace
    ::close(ns);
    entered_ = true;
    log_ = dir_ + "/dnsmasq.log";
    std::vector<std::string> argv = {"/usr/sbin/dnsmasq",
                                     "--keep-in-foreground",
                                     "--no-resolv",
                                     "--no-hosts",
                                     "--port=53",
                                     "--listen-address=127.0.0.1",
                                     "--bind-interfaces",
                                     "--log-queries",
                                     "--log-facility=" + log_,
                                     "--user=root",
                                     "--group=root",
                                     "--pid-file=",
                                     "--local-ttl=120"};
    argv.insert(argv.end(), options.begin(), options.end());
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    // Ready when its log says so and its port answers (bounded).
    ASSERT_TRUE(WaitFor([&] { return Slurp(log_).find("started") != std::string::npos; }, 10000)) << Slurp(log_);
    ASSERT_TRUE(WaitFor(
        [] {
          return Run({"/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/53"}).status == 0;
        },
        10000))
        << Slurp(log_);
  }

  void Stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
    }
    if (entered_) {
      EXPECT_EQ(::setns(original_, CLONE_NEWNET), 0);
      entered_ = false;
    }
    if (original_ >= 0) ::close(original_), original_ = -1;
    if (!netns_.empty()) Run({"ip", "netns", "del", netns_}), netns_.clear();
    if (!dir_.empty()) Run({"rm", "-rf", dir_}), dir_.clear();
  }
  ~DnsmasqNetns() { Stop(); }

  // Whether dnsmasq got a query for `name` (its log: " query[A] name from ...").
  bool Saw(const std::string& name, const std::string& type = "A") const { return Count(name, type) > 0; }
  size_t Count(const std::string& name, const std::string& type) const {
    const std::string text = Slurp(log_), needle = "query[" + type + "] " + name + " from";
    size_t n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    return n;
  }
  std::string Log() const { return Slurp(log_); }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_, netns_, log_;
  int original_ = -1;
  bool entered_ = false;
  pid_t pid_ = -1;
};

}  // namespace cordon::test
