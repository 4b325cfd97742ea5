// The host-wide BPF LSM object's lifetime (README, "one host-wide object"):
// loaded on first use, unloaded when the last sandbox leaves.
//
// In a file of its own, which sorts (and so registers and runs) last in
// lsm_tests: the object is loaded when it starts (the run's idle anchor
// sandbox, harness.cc) and no test needs it afterwards, so the test costs no
// load of its own (one takes minutes under TCG on 6.12). Run otherwise (a
// filter, --gtest_shuffle), it attaches the anchor again for the tests after it.
#include <bpf/bpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <string>

#include "abi/cordon_common.h"
#include "loader/sandbox.h"
#include "tests/integration/harness.h"
#include "tests/lsm/probes.h"

namespace cordon::test {
namespace {

const std::string kLsmPins = "/sys/fs/bpf/cordon/v" + std::to_string(CORDON_LAYOUT_VERSION) + "/lsm";

// The programs the pinned BPF LSM object's links run.
std::set<uint32_t> LsmObjectPrograms() {
  std::set<uint32_t> ids;
  DIR* dir = ::opendir(kLsmPins.c_str());
  if (!dir) return ids;
  while (dirent* e = ::readdir(dir)) {
    if (std::strncmp(e->d_name, "link_", 5) != 0) continue;
    int fd = bpf_obj_get((kLsmPins + "/" + e->d_name).c_str());
    if (fd < 0) continue;
    bpf_link_info info = {};
    uint32_t len = sizeof info;
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0) ids.insert(info.prog_id);
    ::close(fd);
  }
  ::closedir(dir);
  return ids;
}

// Loaded programs that are `ids` or cordon's LSM or tracing (fexit) programs.
std::string CordonLsmProgramsLoaded(const std::set<uint32_t>& ids) {
  std::string out;
  for (const auto& p : LoadedPrograms()) {
    bool cordon_lsm =
        (p.type == BPF_PROG_TYPE_LSM || p.type == BPF_PROG_TYPE_TRACING) && std::strncmp(p.name, "cordon", 6) == 0;
    if (cordon_lsm || ids.count(p.id)) out += " " + std::to_string(p.id) + ":" + p.name;
  }
  return out;
}

int OpenReadErrno(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

// With the anchor and two sandboxes attached, the anchor and then one leave:
// the same object (same programs) stays and enforces for the other; when
// that last one leaves, the pins are removed and no cordon LSM program stays
// loaded. The test VM runs one suite and every test detaches what it
// attached, so no other sandbox may be attached there.
TEST(LsmObject, UnloadedWhenTheLastSandboxLeaves) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  const bool usable = LsmUsableHere();
  const char* expect = std::getenv("CORDON_EXPECT_LSM");
  if (expect && std::string(expect) == "1") {
    ASSERT_TRUE(usable) << "this VM boots with bpf in lsm=: cordon must be able to enforce";
  }
  if (!usable) GTEST_SKIP() << "BPF LSM not usable on this kernel (LsmHonesty covers it)";
  char tmpl[] = "/tmp/cordon-unload-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  struct RemoveDir {
    std::string dir;
    ~RemoveDir() { cordon::test::Run({"rm", "-rf", dir}); }
  } remove_dir{dir};
  ::mkdir((dir + "/in").c_str(), 0755);
  const std::string secret = dir + "/secret";
  WriteText(secret, "secret\n");
  PolicyFile policy("apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: unload}\nspec:\n  files:\n"
                    "    include: [runtime-minimal]\n    read: [" + dir + "/in]\n");
  TestCgroup one("unload-1"), two("unload-2");
  for (const TestCgroup* cg : {&one, &two}) {
    CommandResult r = Cordon({"attach", "--cgroup", cg->path(), "--policy", policy.path()});
    ASSERT_EQ(r.status, 0) << r.err;
  }
  const std::set<uint32_t> ids = LsmObjectPrograms();
  ASSERT_GT(ids.size(), 10u) << "the object's links were not found under " << kLsmPins;
  LsmAnchorReleased no_anchor;
  auto sandboxes = ListSandboxes();
  ASSERT_TRUE(sandboxes.ok()) << sandboxes.error().ToString();
  std::string others;
  for (const auto& sb : *sandboxes)
    if (sb.cgroup_path != one.relative() && sb.cgroup_path != two.relative()) others += " " + sb.cgroup_path;
  if (!others.empty()) {
    if (!std::getenv("CORDON_VM")) GTEST_SKIP() << "other cordon sandboxes are attached on this host:" << others;
    FAIL() << "sandboxes left attached by earlier tests:" << others;
  }
  auto secret_from = [&](const TestCgroup& cg) { return RunInCgroup(cg.path(), [&] { return OpenReadErrno(secret); }); };
  auto same_object = [&] {
    EXPECT_EQ(LsmObjectPrograms(), ids) << "the same object keeps running (not reloaded)";
    for (uint32_t id : ids) {
      int fd = bpf_prog_get_fd_by_id(id);
      EXPECT_GE(fd, 0) << "program " << id << " of the object is gone";
      if (fd >= 0) ::close(fd);
    }
  };
  if (no_anchor.detached()) same_object();  // two sandboxes left

  ASSERT_EQ(Cordon({"detach", "--cgroup", one.path()}).status, 0);
  struct stat st;
  EXPECT_EQ(::stat(kLsmPins.c_str(), &st), 0) << "unloaded while a sandbox is still attached";
  same_object();
  EXPECT_EQ(secret_from(two), EPERM) << "the remaining sandbox is still enforced";
  EXPECT_EQ(secret_from(one), 0) << "the detached one is not";
  auto events = TakeEvents(two.path());
  bool reported = false;
  for (const auto& e : events) reported |= e.kind() == "file.open" && EndsWith(e.file().path(), "/secret");
  EXPECT_TRUE(reported) << Dump(events);

  ASSERT_EQ(Cordon({"detach", "--cgroup", two.path()}).status, 0);
  EXPECT_NE(::stat(kLsmPins.c_str(), &st), 0) << "the pins outlive the last sandbox";
  EXPECT_EQ(errno, ENOENT);
  // Unpinned programs are released after an RCU grace period: wait for it.
  std::string left = CordonLsmProgramsLoaded(ids);
  for (int i = 0; i < 600 && !left.empty(); ++i) {
    ::usleep(50 * 1000);
    left = CordonLsmProgramsLoaded(ids);
  }
  EXPECT_EQ(left, "") << "cordon's BPF LSM programs are still loaded";
  EXPECT_EQ(secret_from(two), 0) << "nothing enforces after the last detach";
}

}  // namespace
}  // namespace cordon::test
