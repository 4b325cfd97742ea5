#include "sys/libbpf_log.h"

#include <bpf/libbpf.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <sstream>

namespace cordon {
namespace {

std::mutex g_mu;
std::deque<std::string>* g_lines = nullptr;
int g_depth = 0;

int Capture(enum libbpf_print_level level, const char* fmt, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;
  // Verifier logs arrive as one long message: keep all of it (its end says why).
  char* buf = nullptr;
  int n = vasprintf(&buf, fmt, args);
  if (n < 0) return n;
  std::unique_ptr<char, decltype(&free)> owned(buf, &free);
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_lines) return n;
  std::istringstream in(buf);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    g_lines->push_back(line);
    if (g_lines->size() > 200) g_lines->pop_front();
  }
  return n;
}

int Silent(enum libbpf_print_level, const char*, va_list) { return 0; }

}  // namespace

LibbpfLogCapture::LibbpfLogCapture() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_depth++ == 0) {
    g_lines = new std::deque<std::string>();
    libbpf_set_print(Capture);
  }
}

LibbpfLogCapture::~LibbpfLogCapture() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (--g_depth == 0) {
    libbpf_set_print(Silent);
    delete g_lines;
    g_lines = nullptr;
  }
}

std::string LibbpfLogCapture::Tail(size_t max_lines) const {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_lines || g_lines->empty()) return "";
  std::string out;
  size_t start = g_lines->size() > max_lines ? g_lines->size() - max_lines : 0;
  for (size_t i = start; i < g_lines->size(); ++i) out += "\n  libbpf: " + (*g_lines)[i];
  return out;
}

}  // namespace cordon
