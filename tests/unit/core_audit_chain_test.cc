// The audit file's hash chain (events/audit_chain.h): what the file sink
// writes verifies, across rotation and reopening, and every kind of change
// to it is found at the line where it was made. No root needed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/unit/temp_dir.h"
#include "events/audit_chain.h"
#include "events/json_line.h"
#include "events/sink.h"

namespace cordon {
namespace {

using cordon::v1::AuditEvent;

class Dir : public cordon::test::TempDir {
 public:
  Dir() : TempDir("chain") {}
};

AuditEvent Event(uint32_t pid) {
  AuditEvent e;
  e.mutable_time()->set_seconds(1700000000 + pid);
  e.set_sandbox("job-1");
  e.set_kind("net.connect");
  e.set_verdict("denied");
  e.set_pid(pid);
  e.mutable_net()->set_address("10.0.0.1");
  e.mutable_net()->set_port(443);
  return e;
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

void Put(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::trunc);
  for (const auto& line : lines) out << line << "\n";
}

// Verifies files (oldest first); "" when the chain holds, else the error.
std::string Verify(const std::vector<std::string>& paths) {
  ChainVerifier v;
  for (const auto& path : paths) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!v.File(path, ss.str())) return v.error();
  }
  return "";
}

TEST(AuditChain, FileStartsWithChainStartAndVerifies) {
  Dir dir;
  const std::string path = dir / "audit.jsonl";
  {
    auto sink = JsonlFileSink::Open(path);
    ASSERT_TRUE(sink) << sink.error().ToString();
    for (uint32_t pid = 1; pid <= 5; ++pid) ASSERT_TRUE((*sink)->Write(Event(pid)).ok());
  }
  auto lines = Lines(path);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[0].rfind(std::string(kChainStartPrefix) + "\"}", 0), 0u) << lines[0];
  for (const auto& line : lines) EXPECT_EQ(ChainOf(line).size(), kChainHexSize) << line;
  EXPECT_EQ(Verify({path}), "");
}

// Fed in pieces split anywhere (as cordon audit verify reads a file), the
// verifier finds what it finds when fed the file whole.
TEST(AuditChain, FeedSplitAnywhereGivesTheSameAnswer) {
  Dir dir;
  const std::string path = dir / "audit.jsonl";
  {
    auto sink = JsonlFileSink::Open(path);
    ASSERT_TRUE(sink);
    for (uint32_t pid = 1; pid <= 4; ++pid) ASSERT_TRUE((*sink)->Write(Event(pid)).ok());
  }
  auto lines = Lines(path);
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  auto by_bytes = [&](const std::string& t, size_t piece) {
    ChainVerifier v;
    v.BeginFile(path);
    for (size_t at = 0; at < t.size(); at += piece)
      if (!v.Feed(std::string_view(t).substr(at, piece))) return v.error();
    return v.EndFile() ? std::string() : v.error();
  };
  for (size_t piece : {1, 7, 64, 100000}) EXPECT_EQ(by_bytes(text, piece), "") << piece;
  std::string edited = text;
  edited.replace(edited.find("10.0.0.1", text.find('\n', text.find('\n') + 1)), 8, "10.0.0.9");
  ChainVerifier whole;
  ASSERT_FALSE(whole.File(path, edited));
  for (size_t piece : {1, 7, 64}) EXPECT_EQ(by_bytes(edited, piece), whole.error()) << piece;
  // No newline at the end: the last line is incomplete, whatever the split.
  const std::string cut = text.substr(0, text.size() - 1);
  for (size_t piece : {1, 64}) EXPECT_NE(by_bytes(cut, piece).find(":5: the last line is incomplete"), std::string::npos) << by_bytes(cut, piece);
  ChainVerifier empty;
  EXPECT_FALSE(empty.File(path, ""));
  EXPECT_NE(empty.error().find("empty file"), std::string::npos);
}

TEST(AuditChain, AppendingWriterContinuesTheChain) {
  Dir dir;
  const std::string path = dir / "audit.jsonl";
  for (uint32_t round = 0; round < 3; ++round) {
    auto sink = JsonlFileSink::Open(path);
    ASSERT_TRUE(sink);
    ASSERT_TRUE((*sink)->Write(Event(round)).ok());
  }
  auto lines = Lines(path);
  ASSERT_EQ(lines.size(), 4u) << "one chain.start, then three events";
  EXPECT_EQ(Verify({path}), "");
}

TEST(AuditChain, EveryChangeIsFoundWhereItWasMade) {
  Dir dir;
  const std::string path = dir / "audit.jsonl";
  {
    auto sink = JsonlFileSink::Open(path);
    ASSERT_TRUE(sink);
    for (uint32_t pid = 1; pid <= 6; ++pid) ASSERT_TRUE((*sink)->Write(Event(pid)).ok());
  }
  const auto good = Lines(path);
  ASSERT_EQ(Verify({path}), "");  // the control

  auto edited = good;  // a denied connect turned into another address
  edited[3].replace(edited[3].find("10.0.0.1"), 8, "10.0.0.2");
  Put(path, edited);
  EXPECT_NE(Verify({path}).find(path + ":4: chain value does not match"), std::string::npos) << Verify({path});

  auto removed = good;  // the line of pid 3 deleted
  removed.erase(removed.begin() + 3);
  Put(path, removed);
  EXPECT_NE(Verify({path}).find(path + ":4: chain value does not match"), std::string::npos) << Verify({path});

  auto swapped = good;
  std::swap(swapped[2], swapped[3]);
  Put(path, swapped);
  EXPECT_NE(Verify({path}).find(path + ":3: chain value does not match"), std::string::npos) << Verify({path});

  auto unchained = good;  // a line added without a chain value
  unchained.insert(unchained.begin() + 5, "{\"kind\":\"net.connect\"}");
  Put(path, unchained);
  EXPECT_NE(Verify({path}).find(path + ":6: not a chained line"), std::string::npos) << Verify({path});

  auto front_cut = good;  // the start of the trail removed
  front_cut.erase(front_cut.begin(), front_cut.begin() + 2);
  Put(path, front_cut);
  EXPECT_NE(Verify({path}).find(path + ":1: the chain starts in the middle"), std::string::npos) << Verify({path});

  Put(path, good);
  EXPECT_EQ(Verify({path}), "") << "the original verifies again";
}

TEST(AuditChain, RotatedFilesChainAcrossAndAMissingOneIsFound) {
  Dir dir;
  const std::string path = dir / "audit.jsonl";
  JsonlOptions options;
  options.max_bytes = 1200;  // a few lines per file
  options.keep = 10;
  options.fsync = JsonlOptions::Fsync::kNever;
  {
    auto sink = JsonlFileSink::Open(path, options);
    ASSERT_TRUE(sink);
    // Single writes and batches, as the agent's fan-out makes them.
    for (uint32_t pid = 1; pid <= 10; ++pid) ASSERT_TRUE((*sink)->Write(Event(pid)).ok());
    std::string batch;
    for (uint32_t pid = 11; pid <= 30; ++pid) batch += ToJsonLine(Event(pid)) + "\n";
    Status status;
    EXPECT_EQ((*sink)->WriteLines(batch, 20, &status), 20u);
    ASSERT_TRUE(status.ok()) << status.error().ToString();
  }
  std::vector<std::string> files;
  for (int k = 10; k >= 1; --k)
    if (std::filesystem::exists(path + "." + std::to_string(k))) files.push_back(path + "." + std::to_string(k));
  files.push_back(path);
  ASSERT_GE(files.size(), 4u) << "rotated";
  size_t events = 0;
  for (const auto& f : files) {
    auto lines = Lines(f);
    EXPECT_EQ(lines[0].rfind(kChainStartPrefix, 0), 0u) << f << " starts with its chain.start";
    events += lines.size() - 1;
    EXPECT_LE(std::filesystem::file_size(f), options.max_bytes) << f;
  }
  EXPECT_EQ(events, 30u);
  EXPECT_EQ(Verify(files), "");

  std::vector<std::string> gap = files;
  gap.erase(gap.begin() + 1);
  EXPECT_NE(Verify(gap).find(gap[1] + ":1: the file starts after chain value"), std::string::npos) << Verify(gap);
  EXPECT_NE(Verify(gap).find("a file is missing"), std::string::npos);

  std::vector<std::string> reordered = files;
  std::swap(reordered[1], reordered[2]);
  EXPECT_NE(Verify(reordered), "");
}

// Files of two writers given together (a cordon run's log, then an agent's
// file): the second starts a chain of its own (its chain.start names no
// previous value), which is not a break, and the verifier says where it
// starts. The control: a file that names a value the file before it does not
// end with is still a break, wherever it comes.
TEST(AuditChain, AFileStartingAChainOfItsOwnIsNotABreak) {
  Dir dir;
  JsonlOptions options;
  options.fsync = JsonlOptions::Fsync::kNever;
  const std::string run = dir / "run.jsonl", agent = dir / "agent.jsonl";
  for (const auto& path : {run, agent}) {
    auto sink = JsonlFileSink::Open(path, options);
    ASSERT_TRUE(sink);
    for (uint32_t pid = 1; pid <= 3; ++pid) ASSERT_TRUE((*sink)->Write(Event(pid)).ok());
  }
  ChainVerifier v;
  for (const auto& path : {run, agent}) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    ASSERT_TRUE(v.File(path, ss.str())) << v.error();
  }
  EXPECT_EQ(v.new_chains(), std::vector<std::string>{agent});
  EXPECT_EQ(Verify({agent, run}), "");

  // The control: a rotated file after another writer's file names a value
  // that file does not end with.
  const std::string rotated = dir / "rotated.jsonl";
  options.max_bytes = 1200;
  options.keep = 3;
  {
    auto sink = JsonlFileSink::Open(rotated, options);
    ASSERT_TRUE(sink);
    for (uint32_t pid = 1; pid <= 12; ++pid) ASSERT_TRUE((*sink)->Write(Event(pid)).ok());
  }
  ASSERT_TRUE(std::filesystem::exists(rotated + ".1"));
  EXPECT_EQ(Verify({rotated + ".1", rotated}), "");
  EXPECT_NE(Verify({run, rotated}).find("a file is missing"), std::string::npos) << Verify({run, rotated});
}

}  // namespace
}  // namespace cordon
