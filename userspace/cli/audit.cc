// `cordon audit verify FILE...`: checks the hash chain of audit files.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "events/audit_chain.h"
#include "util/fd.h"
#include "util/text.h"

namespace cordon::cli {
namespace {

const char* kAuditHelp =
    "usage: cordon audit verify FILE...\n"
    "\n"
    "Checks the hash chain of audit files (the agent's file sinks and `cordon run --audit`):\n"
    "every line's \"chain\" value must be the SHA-256 of the line before it and of the line\n"
    "itself, and each file must start where the file before it ended. Give rotated files\n"
    "oldest first (e.g. audit.jsonl.3 audit.jsonl.2 audit.jsonl.1 audit.jsonl).\n"
    "Prints the first changed, missing, inserted or reordered line (FILE:LINE) and exits 1;\n"
    "else the number of lines verified and the last chain value, and exits 0.\n"
    "The chain shows changes to part of the trail; someone able to rewrite all of it can\n"
    "compute a new chain: compare the last value with one kept elsewhere.\n";

int Usage(const std::string& error) {
  PrintError(error);
  std::fputs(kAuditHelp, stderr);
  return 2;
}

// Feeds every line of `path`; false at the first problem (verifier's error).
bool VerifyFile(const std::string& path, ChainVerifier* verifier, std::string* error) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return *error = "open " + path + ": " + std::strerror(errno), false;
  verifier->BeginFile(path);
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return *error = "read " + path + ": " + std::strerror(errno), false;
    if (n == 0) break;
    if (!verifier->Feed(std::string_view(buf, static_cast<size_t>(n)))) return *error = verifier->error(), false;
  }
  if (!verifier->EndFile()) return *error = verifier->error(), false;
  return true;
}

}  // namespace

int AuditCommand(const Args& args) {
  if (args.empty()) return std::fputs(kAuditHelp, stderr), 2;
  if (args[0] == "-h" || args[0] == "--help") return std::fputs(kAuditHelp, stdout), 0;
  if (args[0] != "verify") return Usage("unknown audit subcommand '" + DisplayText(EscapeWorkloadBytes(args[0])) + "'");
  if (args.size() < 2) return Usage("audit verify needs at least one FILE");
  ChainVerifier verifier;
  for (size_t i = 1; i < args.size(); ++i) {
    std::string error;
    if (!VerifyFile(args[i], &verifier, &error))
      return PrintError("audit verify: " + DisplayText(EscapeWorkloadBytes(error))), 1;
  }
  std::printf("%llu lines verified in %zu file%s; last chain value %s\n",
              static_cast<unsigned long long>(verifier.lines()), args.size() - 1, args.size() == 2 ? "" : "s",
              verifier.head().c_str());
  // Not a break, but the files are not one chain: whoever keeps the last
  // value of each chain elsewhere compares them.
  for (const auto& file : verifier.new_chains())
    std::printf("a chain of its own starts at %s (it names no previous file)\n",
                DisplayText(EscapeWorkloadBytes(file)).c_str());
  return 0;
}

}  // namespace cordon::cli
