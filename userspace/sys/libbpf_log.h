// Captures libbpf's messages (verifier logs included) while in scope, so that
// a failure reports the kernel's reason instead of printing it at random.
#pragma once

#include <string>

namespace cordon {

class LibbpfLogCapture {
 public:
  LibbpfLogCapture();
  ~LibbpfLogCapture();
  LibbpfLogCapture(const LibbpfLogCapture&) = delete;
  LibbpfLogCapture& operator=(const LibbpfLogCapture&) = delete;

  // The last lines captured, prefixed with "\n  libbpf: ", or "" if none.
  std::string Tail(size_t max_lines = 12) const;
};

}  // namespace cordon
