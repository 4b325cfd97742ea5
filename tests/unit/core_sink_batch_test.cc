// The agent's batched form of the JSONL sink (JsonlFileSink::WriteLines):
// the same files as Write() per event, rotation included, and no partial
// line when a write fails.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "events/decoder.h"
#include "events/json_line.h"
#include "events/sink.h"
#include "util/fd.h"

namespace cordon {
namespace {

using cordon::v1::AuditEvent;

// The file sink's mechanics without the hash chain (lines as ToJsonLine
// makes them, sizes exact); core_audit_chain_test.cc covers the chain.
JsonlOptions Plain() {
  JsonlOptions options;
  options.chain = false;
  return options;
}

std::string TempDirPath() {
  char tmpl[] = "/tmp/cordon-sink-batch-test.XXXXXX";
  char* p = ::mkdtemp(tmpl);
  EXPECT_NE(p, nullptr);
  return p ? p : "";
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

AuditEvent Event(uint32_t pid, size_t reason_length) {
  AuditEvent e;
  e.mutable_time()->set_seconds(1700000000 + pid);
  e.set_sandbox("agent-1");
  e.set_kind("net.sendmsg");
  e.set_pid(pid);
  e.set_reason(std::string(reason_length, 'r'));
  return e;
}

TEST(SinkJsonlBatch, WriteLinesMakesTheSameFilesAsWriteRotationIncluded) {
  const std::string a = TempDirPath(), b = TempDirPath();
  JsonlOptions options = Plain();
  options.fsync = JsonlOptions::Fsync::kNever;
  options.max_bytes = 600;
  options.keep = 50;
  auto single = JsonlFileSink::Open(a + "/audit.jsonl", options);
  auto batched = JsonlFileSink::Open(b + "/audit.jsonl", options);
  ASSERT_TRUE(single.ok() && batched.ok());
  // Lines of varied lengths, one longer than max_bytes, in batches of varied sizes.
  std::vector<AuditEvent> events;
  for (uint32_t i = 0; i < 60; ++i) events.push_back(Event(1000 + i, i == 17 ? 900 : (i * 37) % 200));
  const size_t kBatches[] = {1, 7, 5, 13, 2, 20, 12};
  size_t next = 0;
  for (size_t size : kBatches) {
    std::string lines;
    size_t count = 0;
    for (; count < size && next < events.size(); ++count, ++next) {
      ASSERT_TRUE((*single)->Write(events[next]).ok());
      AppendJsonLine(events[next], &lines);
      lines += '\n';
    }
    Status status;
    EXPECT_EQ((*batched)->WriteLines(lines, count, &status), count);
    EXPECT_TRUE(status.ok()) << status.error().ToString();
  }
  ASSERT_EQ(next, events.size());
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(a)) {
    const std::string name = entry.path().filename();
    EXPECT_EQ(Slurp(a + "/" + name), Slurp(b + "/" + name)) << name;
    files++;
  }
  EXPECT_GT(files, 10) << "rotated many times";
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(b), std::filesystem::directory_iterator()), files);
  std::filesystem::remove_all(a);
  std::filesystem::remove_all(b);
}

// A write cut short (here by RLIMIT_FSIZE) keeps the whole lines that got
// out, removes the partial one, says how many were written, and the sink
// writes again once the cause is gone.
TEST(SinkJsonlBatch, FailedWriteKeepsWholeLinesOnly) {
  const std::string dir = TempDirPath();
  const std::string path = dir + "/audit.jsonl";
  auto sink = JsonlFileSink::Open(path, Plain());
  ASSERT_TRUE(sink.ok());
  const std::string line = ToJsonLine(Event(1, 10)) + "\n";
  std::string three;
  for (uint32_t pid : {2u, 3u, 4u}) three += ToJsonLine(Event(pid, 10)) + "\n";
  ASSERT_EQ(three.size(), 3 * line.size());
  Status status;
  ASSERT_EQ((*sink)->WriteLines(line, 1, &status), 1u);

  struct rlimit old_limit = {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit limit = old_limit;
  limit.rlim_cur = line.size() * 2 + line.size() / 2;  // room for one more line and a half
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  size_t written = (*sink)->WriteLines(three, 3, &status);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old_limit), 0);
  std::signal(SIGXFSZ, old_handler);

  EXPECT_EQ(written, 1u);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().err, EFBIG);
  EXPECT_NE(status.error().ToString().find(path), std::string::npos) << status.error().ToString();
  EXPECT_EQ(Slurp(path), line + three.substr(0, line.size()));
  ASSERT_EQ((*sink)->WriteLines(three.substr(line.size()), 2, &status), 2u);
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(Slurp(path), line + three);
  std::filesystem::remove_all(dir);
}

// Pages of the file that are in the page cache (mincore over a mapping of it).
size_t ResidentPages(const std::string& path, size_t* pages) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st = {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || st.st_size == 0) return 0;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  *pages = (static_cast<size_t>(st.st_size) + page - 1) / page;
  void* map = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd.get(), 0);
  if (map == MAP_FAILED) return 0;
  std::vector<unsigned char> in_core(*pages);
  size_t resident = 0;
  if (::mincore(map, static_cast<size_t>(st.st_size), in_core.data()) == 0)
    for (unsigned char c : in_core) resident += c & 1;
  ::munmap(map, static_cast<size_t>(st.st_size));
  return resident;
}

// Synced lines leave the page cache (the agent never reads them back), the
// unsynced tail stays, and nothing written is lost on the way.
TEST(SinkJsonlBatch, SyncedLinesLeaveThePageCache) {
  const std::string dir = TempDirPath();
  struct statfs fs = {};
  ASSERT_EQ(::statfs(dir.c_str(), &fs), 0);
  if (fs.f_type == TMPFS_MAGIC) GTEST_SKIP() << dir << " is on tmpfs, whose pages are the file";
  const std::string path = dir + "/audit.jsonl";
  JsonlOptions options = Plain();
  options.fsync = JsonlOptions::Fsync::kNever;  // only Sync() syncs
  auto sink = JsonlFileSink::Open(path, options);
  ASSERT_TRUE(sink.ok());
  std::string lines, expected;
  size_t count = 0;
  for (uint32_t i = 0; lines.size() < (4u << 20); ++i, ++count) {
    AppendJsonLine(Event(i, 100 + i % 300), &lines);
    lines += '\n';
  }
  Status status;
  ASSERT_EQ((*sink)->WriteLines(lines, count, &status), count);
  expected = lines;
  size_t pages = 0;
  // Written, not synced: in the page cache (dirty pages cannot be dropped).
  EXPECT_EQ(ResidentPages(path, &pages), pages);
  ASSERT_GT(pages, 1000u);
  ASSERT_TRUE((*sink)->Sync().ok());
  size_t after_sync = ResidentPages(path, &pages);
  EXPECT_LE(after_sync, 1u) << "of " << pages << " pages (the partial last page may stay)";

  // More lines: only the new, unsynced ones are in the cache, until the next sync.
  lines.clear();
  count = 0;
  for (uint32_t i = 0; lines.size() < (1u << 20); ++i, ++count) {
    AppendJsonLine(Event(i, 50), &lines);
    lines += '\n';
  }
  ASSERT_EQ((*sink)->WriteLines(lines, count, &status), count);
  expected += lines;
  size_t resident = ResidentPages(path, &pages);
  EXPECT_GE(resident, (1u << 20) / 4096 - 1);
  EXPECT_LE(resident, (1u << 20) / 4096 + 2);
  ASSERT_TRUE((*sink)->Sync().ok());
  EXPECT_LE(ResidentPages(path, &pages), 1u);
  EXPECT_EQ(Slurp(path), expected);
  std::filesystem::remove_all(dir);
}

TEST(SinkJsonlBatch, StreamSinkTakesJsonLinesOnlyInJsonFormat) {
  EXPECT_TRUE(StreamSink(1, StreamSink::Format::kJson).TakesJsonLines());
  EXPECT_FALSE(StreamSink(1, StreamSink::Format::kCompact).TakesJsonLines());
}

}  // namespace
}  // namespace cordon
