// Small helpers shared by the B1 (egress_bench), B2 (file_bench) and B3 (policy_bench)
// benchmarks: clocks, quantiles, JSON output, machine description, BPF
// program statistics, option parsing and output. Header-only.
#pragma once

#include <bpf/bpf.h>
#include <signal.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace bench {

[[noreturn]] inline void Die(const std::string& what) { throw std::runtime_error(what); }

// Interruption: OnSignal (installed for SIGINT/SIGTERM by each benchmark)
// sets g_stop, and CheckStop turns it into a Die at the next safe point.
inline volatile sig_atomic_t g_stop = 0;
inline void OnSignal(int) { g_stop = 1; }
inline void CheckStop() {
  if (g_stop) Die("interrupted");
}

// Progress lines on stderr, "<g_log_name>: ...": each benchmark names itself.
inline const char* g_log_name = "bench";
__attribute__((format(printf, 1, 2))) inline void Log(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "%s: ", g_log_name);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
}

inline int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

struct Summary {
  double median = NAN, q1 = NAN, q3 = NAN, min = NAN, max = NAN;
  size_t n = 0;
};

inline double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  double pos = q * double(v.size() - 1);
  size_t lo = size_t(std::floor(pos)), hi = size_t(std::ceil(pos));
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

inline Summary Summarize(const std::vector<double>& v) {
  Summary s;
  s.n = v.size();
  if (v.empty()) return s;
  s.median = Quantile(v, 0.5);
  s.q1 = Quantile(v, 0.25);
  s.q3 = Quantile(v, 0.75);
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  return s;
}

inline std::string Json(const Summary& s, int prec = 4) {
  char b[320];
  if (s.n == 0) return "null";
  std::snprintf(b, sizeof b,
                "{\"median\": %.*f, \"q1\": %.*f, \"q3\": %.*f, \"min\": %.*f, \"max\": %.*f, \"n\": %zu}", prec,
                s.median, prec, s.q1, prec, s.q3, prec, s.min, prec, s.max, s.n);
  return b;
}

inline std::string JsonStr(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (c == '\n') o += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20) o += ' ';
    else o += c;
  }
  return o + "\"";
}

inline std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

inline std::string CpuInfoField(const std::string& key) {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) {
      auto p = line.find(':');
      return p == std::string::npos ? line : Trim(line.substr(p + 2));
    }
  return "";
}

// {"nproc": .., "cpu": .., "kernel": .., "date": ..}
inline std::string MachineJson() {
  utsname u{};
  uname(&u);
  char date[64];
  time_t now = time(nullptr);
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  return "{\"nproc\": " + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + ", \"cpu\": " +
         JsonStr(CpuInfoField("model name")) + ", \"kernel\": " + JsonStr(u.release) + ", \"date\": " +
         JsonStr(date) + "}";
}

// run_time_ns, run_cnt of a program (kernel accounting; needs BPF_ENABLE_STATS).
inline std::pair<uint64_t, uint64_t> ProgStats(int fd) {
  bpf_prog_info info{};
  uint32_t len = sizeof info;
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) Die("inspect program (bpf_obj_get_info_by_fd)");
  return {info.run_time_ns, info.run_cnt};
}

inline uint32_t ProgId(int fd) {
  bpf_prog_info info{};
  uint32_t len = sizeof info;
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) Die("inspect program (bpf_obj_get_info_by_fd)");
  return info.id;
}

// The program a link (fd) runs.
inline uint32_t LinkProgId(int link_fd) {
  bpf_link_info li{};
  uint32_t len = sizeof li;
  if (bpf_obj_get_info_by_fd(link_fd, &li, &len) != 0) return 0;
  return li.prog_id;
}

inline void WriteFileOrDie(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.close();
  if (!f) Die("write " + path);
}

// Writes a benchmark's JSON to `path`, or to stdout when `path` is empty.
// Returns whether it went to a file.
inline bool EmitJson(const std::string& path, const std::string& json) {
  if (path.empty()) {
    std::fputs(json.c_str(), stdout);
    return false;
  }
  WriteFileOrDie(path, json);
  return true;
}

// The value of the option at argv[*i], advancing *i; a missing value is a
// usage error (exit status 2).
inline std::string OptionValue(int argc, char** argv, int* i, void (*usage)()) {
  if (*i + 1 >= argc) {
    usage();
    std::exit(2);
  }
  return argv[++*i];
}

}  // namespace bench
