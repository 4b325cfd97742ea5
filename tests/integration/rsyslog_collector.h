// A real syslog collector for tests: Debian's rsyslog, started on loopback
// (imtcp, plain or TLS with the ossl driver, certificates made with the
// openssl CLI), writing the MSG part of each message it receives to a file.
// Nothing of the system's rsyslog is used: rsyslog gets its own config, pid
// file and work directory, and loads no input but imtcp (no imuxsock:
// /dev/log is not touched). Everything is removed at the end.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "tests/integration/harness.h"

namespace cordon::test {

inline constexpr char kRsyslogd[] = "/usr/sbin/rsyslogd";

// A free loopback port (bound and released: rsyslog binds it next).
inline uint16_t FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return 0;
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

// Whether something listens on 127.0.0.1:port (from /proc/net/tcp, without
// connecting: a probe connection would be a session at the collector).
inline bool Listening(uint16_t port) {
  char want[32];
  std::snprintf(want, sizeof want, "0100007F:%04X 00000000:0000 0A", port);
  return Slurp("/proc/net/tcp").find(want) != std::string::npos;
}

// A temporary directory with a CA, a second CA, certificates and rsyslog.
class Collector {
 public:
  enum class Mode { kTcp, kTls };

  Collector() {
    char tmpl[] = "/tmp/cordon-syslog-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ::mkdir((dir_ + "/work").c_str(), 0700);
    port_ = FreePort();
  }
  ~Collector() {
    Stop();
    cordon::test::Run({"rm", "-rf", dir_});
  }

  // ca.pem/ca.key (the collector's CA), other-ca.pem (a CA that signed
  // nothing here), server.pem for `san` signed by `signer` ("ca" or
  // "other-ca"), client.pem signed by ca.
  bool MakeCertificates(const std::string& san = "IP:127.0.0.1", const std::string& signer = "ca") {
    std::string script =
        "set -e; cd " + dir_ +
        "\n"
        "for ca in ca other-ca; do openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 "
        "-subj /CN=$ca-test -keyout $ca.key -out $ca.pem 2>/dev/null; done\n"
        "mk() { openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=$1 -keyout $1.key -out $1.csr "
        "2>/dev/null; printf 'subjectAltName=%s\\nextendedKeyUsage=%s\\n' \"$2\" \"$4\" > $1.ext; "
        "openssl x509 -req -in $1.csr -CA $3.pem -CAkey $3.key -CAcreateserial -days 2 -extfile $1.ext -out $1.pem "
        "2>/dev/null; }\n"
        "mk server '" +
        san + "' " + signer +
        " serverAuth\n"
        "mk client DNS:cordon-agent ca clientAuth\n"
        "chmod 0600 *.key\n";
    auto r = cordon::test::Run({"sh", "-c", script});
    return r.status == 0;
  }

  // Writes the config and starts rsyslogd in the foreground (-n), waiting
  // until it listens. `client_certs`: the TLS listener requires a client
  // certificate signed by ca.pem (AuthMode x509/certvalid), else anon.
  bool Start(Mode mode, bool client_certs = false) {
    std::string conf = "global(workDirectory=\"" + dir_ + "/work\" maxMessageSize=\"64k\"";
    if (mode == Mode::kTls)
      conf += " defaultNetstreamDriverCAFile=\"" + dir_ + "/ca.pem\" defaultNetstreamDriverCertFile=\"" + dir_ +
              "/server.pem\" defaultNetstreamDriverKeyFile=\"" + dir_ + "/server.key\"";
    conf += ")\n";
    // The main queue drains before exit (rsyslog's default waits 1.5 s, then
    // drops what is left): the collector is not what this test measures.
    conf += "main_queue(queue.timeoutShutdown=\"60000\")\n";
    conf += mode == Mode::kTls ? std::string(
                                     "module(load=\"imtcp\" StreamDriver.Name=\"ossl\" StreamDriver.Mode=\"1\" "
                                     "StreamDriver.AuthMode=\"") +
                                     (client_certs ? "x509/certvalid" : "anon") + "\")\n"
                               : "module(load=\"imtcp\")\n";
    conf += "template(name=\"msgonly\" type=\"string\" string=\"%msg%\\n\")\n";
    conf += "ruleset(name=\"collect\") { action(type=\"omfile\" file=\"" + received() + "\" template=\"msgonly\") }\n";
    conf += "input(type=\"imtcp\" address=\"127.0.0.1\" port=\"" + std::to_string(port_) + "\" ruleset=\"collect\")\n";
    std::ofstream(dir_ + "/rsyslog.conf") << conf;
    std::string log = dir_ + "/rsyslogd.log";
    pid_ = ::fork();
    if (pid_ == 0) {
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      std::string conf_path = dir_ + "/rsyslog.conf", pid_path = dir_ + "/rsyslogd.pid";
      ::execl(kRsyslogd, kRsyslogd, "-n", "-f", conf_path.c_str(), "-i", pid_path.c_str(), nullptr);
      _exit(127);
    }
    bool up = WaitFor(
        [&] {
          int status;
          if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            return true;
          }
          return Listening(port_);
        },
        20000);
    return up && pid_ > 0;
  }

  // SIGTERM (rsyslog's orderly shutdown) and wait for the exit.
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);  // our own child
    int status;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  std::string received() const { return dir_ + "/received.log"; }
  std::string Log() const { return Slurp(dir_ + "/rsyslogd.log"); }
  // The ids of the messages received, in the order written.
  std::vector<std::string> Ids() const {
    std::vector<std::string> ids;
    static const std::regex id_re("\"id\":\"([0-9]+-[0-9]+)\"");
    std::string text = Slurp(received());
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) break;  // a line still being written
      std::smatch m;
      std::string line = text.substr(start, end - start);
      if (std::regex_search(line, m, id_re))
        ids.push_back(m[1]);
      else if (line.find("\"kind\":\"loss\"") != std::string::npos)
        ids.push_back("loss");
      start = end + 1;
    }
    return ids;
  }
  std::vector<std::string> Lines() const {
    std::vector<std::string> lines;
    std::string text = Slurp(received()), line;
    for (char c : text)
      if (c == '\n')
        lines.push_back(std::move(line)), line.clear();
      else
        line += c;
    return lines;
  }

  const std::string& dir() const { return dir_; }
  uint16_t port() const { return port_; }

 private:
  std::string dir_;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace cordon::test
