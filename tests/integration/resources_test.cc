// spec.resources (issue 17): cgroup v2 limits set by `cordon run`, attach and
// update. ResourcesV2 needs the controllers in cgroup2 (the test VMs);
// ResourcesHybrid checks what a host without them (memory, pids and cpu on
// cgroup v1) says and that it stops nowhere half-way.
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/integration/harness.h"
#include "tests/integration/oom_victim.h"

namespace cordon::test {
namespace {

bool Has(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

std::string ReadTrimmed(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::vector<cordon::v1::AuditEvent> Kind(const std::vector<cordon::v1::AuditEvent>& events, const std::string& kind) {
  std::vector<cordon::v1::AuditEvent> out;
  for (const auto& e : events)
    if (e.kind() == kind) out.push_back(e);
  return out;
}

bool Cgroup2Offers(const std::string& controller) {
  std::istringstream in(ReadTrimmed(Cgroup2Mount() + "/cgroup.controllers"));
  std::string word;
  while (in >> word)
    if (word == controller) return true;
  return false;
}

std::string Policy(const std::string& name, const std::string& resources) {
  return "apiVersion: cordon/v1\nkind: SandboxPolicy\nmetadata: {name: " + name + "}\nspec:\n" +
         (resources.empty() ? "" : "  resources:\n" + resources);
}

// Forks up to 40 children (each waits on a pipe), then releases and reaps them.
const char* kForks =
    "import os\n"
    "r, w = os.pipe()\n"
    "kids, err = [], 0\n"
    "for i in range(40):\n"
    "  try:\n"
    "    pid = os.fork()\n"
    "  except OSError as e:\n"
    "    err = e.errno\n"
    "    break\n"
    "  if pid == 0:\n"
    "    os.close(w); os.read(r, 1); os._exit(0)\n"
    "  kids.append(pid)\n"
    "os.close(w)\n"
    "for k in kids: os.waitpid(k, 0)\n"
    "print('forks', len(kids), 'errno', err)\n";

// Allocates 64 MiB and touches every page.
const char* kAllocate =
    "b = bytearray(64 << 20)\n"
    "for i in range(0, len(b), 4096): b[i] = 1\n"
    "print('touched', len(b))\n";

// Writes 8 MiB to argv[1] in 1 MiB pieces, with O_DIRECT from a page-aligned
// buffer ("direct") or buffered and flushed by fsync ("buffered"), removes
// the file and prints the bytes per second it measured itself.
const char* kWriteRate =
    "import mmap, os, sys, time\n"
    "path, mode = sys.argv[1], sys.argv[2]\n"
    "buf = mmap.mmap(-1, 1 << 20)\n"
    "buf.write(b'x' * (1 << 20))\n"
    "flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | (os.O_DIRECT if mode == 'direct' else 0)\n"
    "fd = os.open(path, flags, 0o600)\n"
    "t0, n = time.monotonic(), 0\n"
    "while n < (8 << 20): n += os.write(fd, buf)\n"
    "os.fsync(fd)\n"
    "t = time.monotonic() - t0\n"
    "os.close(fd)\n"
    "os.unlink(path)\n"
    "print('rate %.0f' % (n / t))\n";

// The whole disk of the file system `path` is on, "MAJ:MIN" ("" if none):
// io.max and blkio take disks, not partitions.
std::string WholeDiskOf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || major(st.st_dev) == 0) return "";
  const std::string sys = "/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
  struct stat part;
  return ReadTrimmed(::stat((sys + "/partition").c_str(), &part) == 0 ? sys + "/../dev" : sys + "/dev");
}

// `cordon run` with its audit log in a directory of the test's own (the
// default /var/log/cordon is read-only in the test VMs).
class AuditDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cordon-res-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override {
    for (int i = 0; i < runs_; ++i) ::unlink((dir_ + "/audit" + std::to_string(i) + ".jsonl").c_str());
    ::rmdir(dir_.c_str());
  }
  // kWriteRate run `tries` times (until one is above `above`) with `policy`
  // writing `file`; the best rate (bytes/s), -1 if the command failed, and
  // every run's output in *log.
  double WriteRate(const std::string& policy, const std::string& file, const std::string& mode, std::string* log,
                   int tries = 1, double above = 0) {
    double best = -1;
    for (int i = 0; i < tries && best <= above; ++i) {
      CommandResult r = RunCmd(policy, {"/usr/bin/python3", "-c", kWriteRate, file, mode});
      *log += r.out + r.err;
      double rate = -1;
      if (r.status != 0 || std::sscanf(r.out.c_str(), "rate %lf", &rate) != 1) return -1;
      best = std::max(best, rate);
    }
    return best;
  }
  CommandResult RunCmd(const std::string& policy, const std::vector<std::string>& command, bool quiet = false) {
    std::vector<std::string> args{"run", "--policy", policy, "--audit",
                                  dir_ + "/audit" + std::to_string(runs_++) + ".jsonl"};
    if (quiet) args.push_back("--quiet");
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    return Cordon(args);
  }
  std::string dir_;
  int runs_ = 0;
};

class ResourcesV2 : public AuditDir {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "integration tests need root";
    AuditDir::SetUp();
    if (!Cgroup2Offers("pids") || !Cgroup2Offers("memory"))
      GTEST_SKIP() << "no pids/memory controller in cgroup2 at " << Cgroup2Mount() << " (hybrid host)";
  }
};

TEST_F(ResourcesV2, ForkBombStopsAtPidsMaxWithEagain) {
  PolicyFile limited(Policy("pids16", "    pids: 16\n"));
  CommandResult r = RunCmd(limited.path(), {"/usr/bin/python3", "-c", kForks});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(Has(r.err, "pids.max 16 enforced (cgroup v2")) << r.err;
  int forks = -1, err = -1;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "forks %d errno %d", &forks, &err), 2) << r.out;
  EXPECT_EQ(err, EAGAIN) << r.out;
  EXPECT_GE(forks, 1) << r.out;
  EXPECT_LT(forks, 16) << r.out;
  // One resource.pids event: the refused fork (pids.events max, watched).
  auto pids_events = Kind(AuditFileEvents(dir_ + "/audit0.jsonl"), "resource.pids");
  ASSERT_EQ(pids_events.size(), 1u) << r.err;
  EXPECT_EQ(pids_events[0].verdict(), "denied");
  EXPECT_EQ(pids_events[0].resource().event(), "max");
  EXPECT_EQ(pids_events[0].resource().count(), 1u);
  EXPECT_EQ(pids_events[0].resource().limit(), 16u);
  EXPECT_EQ(pids_events[0].enforcement(), "kernel-cgroup");
  EXPECT_TRUE(Has(r.err, "resource.pids x1")) << r.err;

  // Negative control: the same forks without the limit all succeed.
  PolicyFile unlimited(Policy("nolimit", ""));
  CommandResult c = RunCmd(unlimited.path(), {"/usr/bin/python3", "-c", kForks});
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_TRUE(Has(c.out, "forks 40 errno 0")) << c.out;
  EXPECT_TRUE(Kind(AuditFileEvents(dir_ + "/audit1.jsonl"), "resource.pids").empty());
}

// A root command (no capability, but uid 0 owns the cgroup files) once
// wrote "max" to its own pids.max without BPF LSM: cordon run's read-only
// /sys refuses it (EROFS, one event) and the fork limit holds.
TEST_F(ResourcesV2, ARootCommandCannotRaiseItsOwnLimit) {
  const std::string raise =
      std::string("import os\n"
                  "own = [l.split(':', 2)[2] for l in open('/proc/self/cgroup').read().splitlines() "
                  "if l.startswith('0::')][0]\n"
                  "try:\n"
                  "  open('") + Cgroup2Mount() + "' + own + '/pids.max', 'w').write('max')\n"
                  "  print('raise 0')\n"
                  "except OSError as e:\n"
                  "  print('raise', e.errno)\n" + kForks;
  // Negative control: root outside any sandbox raises a cgroup's pids.max.
  TestCgroup cg("res-raise");
  { std::ofstream(cg.path() + "/pids.max") << "16"; }
  ASSERT_EQ(ReadTrimmed(cg.path() + "/pids.max"), "16");
  { std::ofstream(cg.path() + "/pids.max") << "max"; }
  ASSERT_EQ(ReadTrimmed(cg.path() + "/pids.max"), "max") << "negative control: root writes pids.max unconfined";

  PolicyFile as_root(Policy("root", "    pids: 16\n") + "  runAs: root\n");
  CommandResult r = RunCmd(as_root.path(), {"/usr/bin/python3", "-c", raise}, true);
  ASSERT_EQ(r.status, 0) << r.err;
  // BPF LSM, where usable, judges the cgroup2 mount itself (EPERM, tamper.cgroup).
  const bool lsm = LsmUsableHere();
  EXPECT_TRUE(Has(r.out, "raise " + std::to_string(lsm ? EPERM : EROFS))) << r.out;
  int forks = -1, err = -1;
  const size_t at = r.out.find("forks ");
  ASSERT_NE(at, std::string::npos) << r.out;
  ASSERT_EQ(std::sscanf(r.out.c_str() + at, "forks %d errno %d", &forks, &err), 2) << r.out;
  EXPECT_EQ(err, EAGAIN) << r.out;
  EXPECT_LT(forks, 16) << r.out;
  int refusals = 0, lsm_refusals = 0;
  for (const auto& e : AuditFileEvents(dir_ + "/audit0.jsonl")) {
    if (e.kind() == "tamper.cgroup" && e.enforcement() == "kernel-lsm") ++lsm_refusals;
    if (e.enforcement() == "mount") {
      ++refusals;
      EXPECT_EQ(e.file().path().substr(e.file().path().size() - 9), "/pids.max") << e.file().path();
      EXPECT_EQ(e.verdict(), "denied");
    }
  }
  EXPECT_EQ(refusals, lsm ? 0 : 1);
  EXPECT_GE(lsm_refusals, lsm ? 1 : 0);
}

TEST_F(ResourcesV2, AllocationBeyondMemoryMaxIsOomKilled) {
  PolicyFile limited(Policy("mem32", "    memory: 32Mi\n    swap: 0\n"));
  CommandResult r = RunCmd(limited.path(), {"/usr/bin/python3", "-c", kAllocate});
  EXPECT_EQ(r.status, 125) << "killed by the memory limit (README)\n" << r.out << r.err;
  EXPECT_FALSE(Has(r.out, "touched")) << r.out;
  EXPECT_TRUE(Has(r.err, "memory.max 33554432 enforced (cgroup v2")) << r.err;
  EXPECT_TRUE(Has(r.err, " MiB of 32 MiB")) << "the summary's peak line\n" << r.err;
  int oom_kills = 0;
  for (const auto& e : Kind(AuditFileEvents(dir_ + "/audit0.jsonl"), "resource.memory"))
    if (e.resource().event() == "oom_kill") {
      ++oom_kills;
      EXPECT_EQ(e.verdict(), "killed");
      EXPECT_EQ(e.resource().limit(), 32u << 20);
    }
  EXPECT_EQ(oom_kills, 1) << Slurp(dir_ + "/audit0.jsonl");

  // The event names the process killed (bpf/oom), not the idle one beside it.
  CommandResult named = RunCmd(limited.path(), {"/usr/bin/python3", "-c", kAllocateBesideIdle});
  EXPECT_EQ(named.status, 125) << named.out << named.err;
  ExpectOnlyTheAllocatorNamed(AuditFileEvents(dir_ + "/audit1.jsonl"), named.out, Slurp(dir_ + "/audit1.jsonl"));

  // Negative control: the same allocation without the limit succeeds.
  PolicyFile unlimited(Policy("nolimit", ""));
  CommandResult c = RunCmd(unlimited.path(), {"/usr/bin/python3", "-c", kAllocate});
  EXPECT_EQ(c.status, 0) << c.err;
  EXPECT_TRUE(Has(c.out, "touched 67108864")) << c.out;
  EXPECT_TRUE(Kind(AuditFileEvents(dir_ + "/audit2.jsonl"), "resource.memory").empty());
}

TEST_F(ResourcesV2, AttachSetsLimitsAndUpdateAppliesTheNewOnes) {
  TestCgroup cg("res-update");
  ASSERT_EQ(ReadTrimmed(cg.path() + "/pids.max"), "max") << "negative control: no limit before attach";
  PolicyFile p16(Policy("pids16", "    pids: 16\n    memory: 64Mi\n"));
  PolicyFile p32(Policy("pids32", "    pids: 32\n    memory: 128Mi\n"));
  CommandResult a = Cordon({"attach", "--cgroup", cg.path(), "--policy", p16.path(), "--allow-degraded"});
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_TRUE(Has(a.out + a.err, "pids.max 16 enforced")) << a.out << a.err;
  EXPECT_EQ(ReadTrimmed(cg.path() + "/pids.max"), "16");
  EXPECT_EQ(ReadTrimmed(cg.path() + "/memory.max"), std::to_string(64 << 20));
  CommandResult u = Cordon({"update", "--cgroup", cg.path(), "--policy", p32.path(), "--allow-degraded"});
  ASSERT_EQ(u.status, 0) << u.err;
  EXPECT_EQ(ReadTrimmed(cg.path() + "/pids.max"), "32");
  EXPECT_EQ(ReadTrimmed(cg.path() + "/memory.max"), std::to_string(128 << 20));
}

TEST_F(ResourcesV2, AttachKeepsTheStricterPlatformLimitAndSaysSo) {
  TestCgroup cg("res-stricter");
  PolicyFile p16(Policy("pids16", "    pids: 16\n"));
  // The platform's 8 is stricter than the policy's 16 and stays.
  { std::ofstream(Cgroup2Mount() + "/cgroup.subtree_control") << "+pids"; }  // as a platform would
  { std::ofstream(cg.path() + "/pids.max") << "8"; }
  ASSERT_EQ(ReadTrimmed(cg.path() + "/pids.max"), "8");
  CommandResult a = Cordon({"attach", "--cgroup", cg.path(), "--policy", p16.path(), "--allow-degraded"});
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_TRUE(Has(a.out + a.err, "pids.max: the platform's stricter '8' applies (policy: '16')")) << a.out << a.err;
  EXPECT_EQ(ReadTrimmed(cg.path() + "/pids.max"), "8");
}

// Replacements judge against the platform's limits as they were before the
// first attach, not against the file (which holds an earlier policy's value
// since): a stricter platform limit comes back when a looser policy
// replaces a stricter one; a limit the new policy drops is the platform's
// again; detach puts back what cordon changed. (Before, an update wrote the
// new policy's value over the platform's stricter one, and a dropped limit
// kept the old policy's value for good.)
TEST_F(ResourcesV2, ReplacementsKeepThePlatformsStricterLimitAndPutBackTheOnesTheyDrop) {
  TestCgroup cg("res-platform");
  { std::ofstream(Cgroup2Mount() + "/cgroup.subtree_control") << "+pids +memory"; }  // as a platform would
  { std::ofstream(cg.path() + "/pids.max") << "8"; }
  ASSERT_EQ(ReadTrimmed(cg.path() + "/pids.max"), "8");
  ASSERT_EQ(ReadTrimmed(cg.path() + "/memory.max"), "max");
  PolicyFile p16(Policy("plat16", "    pids: 16\n    memory: 64Mi\n"));
  PolicyFile p4(Policy("plat4", "    pids: 4\n    memory: 64Mi\n"));
  PolicyFile p32(Policy("plat32", "    pids: 32\n    memory: 64Mi\n"));
  PolicyFile p32only(Policy("plat32only", "    pids: 32\n"));
  PolicyFile none(Policy("platnone", ""));
  auto apply = [&](const char* verb, const PolicyFile& p) {
    CommandResult r = Cordon({verb, "--cgroup", cg.path(), "--policy", p.path(), "--allow-degraded"});
    EXPECT_EQ(r.status, 0) << r.err;
    return r.out + r.err;
  };
  std::string said = apply("attach", p16);
  EXPECT_TRUE(Has(said, "pids.max: the platform's stricter '8' applies (policy: '16')")) << said;
  EXPECT_EQ(ReadTrimmed(cg.path() + "/pids.max"), "8");
  EXPECT_EQ(ReadTrimmed(cg.path() + "/memory.max"), std::to_string(64 << 20));
  said = apply("update", p4);  // the policy's 4 is stricter
  EXPECT_EQ(ReadTrimmed(cg.path() + "/pids.max"), "4") << said;
  said = apply("update", p32);  // looser than the platform's 8: the 8 comes back
  EXPECT_EQ(ReadTrimmed(cg.path() + "/pids.max"), "8") << said;
  EXPECT_TRUE(Has(said, "pids.max: the platform's stricter '8' applies (policy: '32')")) << said;
  said = apply("update", p32only);  // no memory limit: the platform's none is back
  EXPECT_EQ(ReadTrimmed(cg.path() + "/memory.max"), "max") << said;
  EXPECT_TRUE(Has(said, "memory.max: not in the new policy: the platform's 'max' is back")) << said;
  EXPECT_EQ(ReadTrimmed(cg.path() + "/pids.max"), "8") << said;
  said = apply("update", none);  // no limits at all: every file is the platform's
  EXPECT_EQ(ReadTrimmed(cg.path() + "/pids.max"), "8") << said;
  EXPECT_EQ(ReadTrimmed(cg.path() + "/memory.max"), "max") << said;
  said = apply("update", p4);
  EXPECT_EQ(ReadTrimmed(cg.path() + "/pids.max"), "4") << said;
  EXPECT_EQ(ReadTrimmed(cg.path() + "/memory.max"), std::to_string(64 << 20)) << said;
  // Detach: as the platform had them.
  CommandResult d = Cordon({"detach", "--cgroup", cg.path()});
  EXPECT_EQ(d.status, 0) << d.err;
  EXPECT_EQ(ReadTrimmed(cg.path() + "/pids.max"), "8") << d.err;
  EXPECT_EQ(ReadTrimmed(cg.path() + "/memory.max"), "max") << d.err;
  EXPECT_TRUE(Has(d.err, "pids.max: the platform's '8' is back")) << d.err;
  // The control: the platform itself may raise its limit (nothing of
  // cordon's is left to write it back).
  { std::ofstream(cg.path() + "/pids.max") << "max"; }
  EXPECT_EQ(ReadTrimmed(cg.path() + "/pids.max"), "max");
}

// A disk of the test's own: an ext4 image in a directory under `base` (/tmp:
// a tmpfs in the VMs), on a loop device, mounted on <dir>/mnt; with
// `partitioned`, the file system is on the disk's first partition (an MBR
// written here: no partitioning tool is installed). All of it undone when
// destroyed.
class LoopDisk {
 public:
  explicit LoopDisk(const std::string& base = "/tmp", bool partitioned = false) {
    std::string tmpl_text = base + "/cordon-loop-XXXXXX";
    std::vector<char> tmpl(tmpl_text.begin(), tmpl_text.end());
    tmpl.push_back('\0');
    if (!::mkdtemp(tmpl.data())) return;
    dir_ = tmpl.data();
    const std::string image = dir_ + "/disk.img";
    {
      std::ofstream out(image, std::ios::binary);
      if (partitioned) {
        // One Linux partition (type 0x83) from sector 2048 to the end of 64 MiB.
        unsigned char mbr[512] = {};
        unsigned char* entry = mbr + 446;
        entry[4] = 0x83;
        const uint32_t start = 2048, sectors = (64u << 11) - 2048;
        for (int i = 0; i < 4; ++i)
          entry[8 + i] = (start >> (8 * i)) & 0xff, entry[12 + i] = (sectors >> (8 * i)) & 0xff;
        mbr[510] = 0x55;
        mbr[511] = 0xaa;
        out.write(reinterpret_cast<const char*>(mbr), sizeof mbr);
      }
    }
    if (::truncate(image.c_str(), 64 << 20) != 0) return;
    struct stat st;
    // The test VMs autoload no module from the chroot (tests/vm/init).
    if (::stat("/dev/loop-control", &st) != 0)
      log_ += Run({"/usr/sbin/chroot", "/proc/1/root", "modprobe", "loop"}).err;
    std::vector<std::string> losetup{"/usr/sbin/losetup", "--find", "--show", image};
    if (partitioned) losetup.insert(losetup.begin() + 1, "--partscan");
    CommandResult loop = Run(losetup);
    log_ += loop.err;
    if (loop.status != 0) return;
    device_ = loop.out.substr(0, loop.out.find('\n'));
    const std::string fs_device = partitioned ? device_ + "p1" : device_;
    struct stat node;
    if (!WaitFor([&] { return ::stat(fs_device.c_str(), &node) == 0; }, 5000)) {
      log_ += fs_device + " did not appear";
      return;
    }
    CommandResult mkfs = Run({"/usr/sbin/mkfs.ext4", "-q", "-F", fs_device});
    log_ += mkfs.out + mkfs.err;
    if (mkfs.status != 0 || ::mkdir(mnt().c_str(), 0755) != 0) return;
    if (::mount(fs_device.c_str(), mnt().c_str(), "ext4", 0, nullptr) != 0) {
      log_ += std::string("mount: ") + std::strerror(errno);
      return;
    }
    mounted_ = true;
    // The command's dynamic uid reaches and writes it.
    if (::chmod(dir_.c_str(), 0755) != 0 || ::chmod(mnt().c_str(), 01777) != 0)
      log_ += std::string("chmod: ") + std::strerror(errno);
  }
  ~LoopDisk() {
    if (mounted_) ::umount2(mnt().c_str(), 0);
    if (!device_.empty()) Run({"/usr/sbin/losetup", "-d", device_});
    if (dir_.empty()) return;
    ::rmdir(mnt().c_str());
    ::unlink((dir_ + "/disk.img").c_str());
    ::rmdir(dir_.c_str());
  }
  bool ok() const { return mounted_; }
  std::string mnt() const { return dir_ + "/mnt"; }
  const std::string& device() const { return device_; }
  const std::string& log() const { return log_; }

 private:
  std::string dir_, device_, log_;
  bool mounted_ = false;
};

// ioWriteBytesPerSecond on cgroup v2: io.max wbps on the disk of the write
// path holds direct writes and, since cgroup v2 charges writeback to the
// writer's cgroup, buffered writes flushed by fsync too; measured by the
// command itself (a ratio with a wide margin, not a timing).
TEST_F(ResourcesV2, IoMaxHoldsDirectAndBufferedWritesOnALoopDisk) {
  if (!Cgroup2Offers("io")) GTEST_SKIP() << "no io controller in cgroup2 at " << Cgroup2Mount();
  LoopDisk disk;
  ASSERT_TRUE(disk.ok()) << disk.log();
  const std::string id = WholeDiskOf(disk.mnt());
  ASSERT_FALSE(id.empty());
  const std::string files = "  files:\n    include: [runtime-minimal, python3]\n    write: [" + disk.mnt() + "]\n";
  PolicyFile limited(Policy("io2m", "    ioWriteBytesPerSecond: 2Mi\n") + files);
  PolicyFile unlimited(Policy("nolimit", "") + files);
  constexpr double kLimit = 2 << 20;
  for (const char* mode : {"direct", "buffered"}) {
    std::string log;
    const double rate = WriteRate(limited.path(), disk.mnt() + "/out", mode, &log);
    EXPECT_TRUE(Has(log, "io.max " + id + " wbps=2097152 enforced (cgroup v2")) << log;
    EXPECT_FALSE(Has(log, "NOT enforced")) << log;
    ASSERT_GT(rate, 0) << log;
    EXPECT_LE(rate / kLimit, 1.5) << mode << " writes at most ~the limit\n" << log;
    // Negative control: without the limit the same writes go well above it
    // (up to three tries on a loaded machine; the limited run is never retried).
    std::string free_log;
    const double free_rate = WriteRate(unlimited.path(), disk.mnt() + "/out", mode, &free_log, 3, 3 * kLimit);
    EXPECT_GE(free_rate / kLimit, 3) << mode << ", negative control: unlimited\n" << free_log;
  }
}

// A file system on a partition is throttled on its whole disk (io.max and
// blkio refuse partitions): a loop disk the test partitions, on the host's
// disk, the run's outcome naming the loop device's own number. (In the VMs:
// the host kernel finds no partition table on a loop device.)
TEST_F(ResourcesV2, APartitionIsThrottledOnItsWholeDisk) {
  if (!Cgroup2Offers("io")) GTEST_SKIP() << "no io controller in cgroup2 at " << Cgroup2Mount();
  LoopDisk disk("/tmp", true);
  ASSERT_TRUE(disk.ok()) << disk.log();
  struct stat st;
  ASSERT_EQ(::stat(disk.mnt().c_str(), &st), 0);
  const std::string partition = std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
  const std::string whole = ReadTrimmed("/sys/block/" + disk.device().substr(5) + "/dev");
  ASSERT_FALSE(whole.empty()) << disk.device();
  ASSERT_NE(partition, whole) << "the mount is on the partition";
  const std::string files = "  files:\n    include: [runtime-minimal, python3]\n    write: [" + disk.mnt() + "]\n";
  PolicyFile limited(Policy("io2m", "    ioWriteBytesPerSecond: 2Mi\n") + files);
  std::string log;
  const double rate = WriteRate(limited.path(), disk.mnt() + "/out", "direct", &log);
  EXPECT_TRUE(Has(log, "io.max " + whole + " wbps=2097152 enforced (cgroup v2")) << log;
  EXPECT_FALSE(Has(log, "io.max " + partition)) << log;
  ASSERT_GT(rate, 0) << log;
  EXPECT_LE(rate / (2 << 20), 1.5) << "writes to the partition are held by the disk's limit\n" << log;
}

// attach keeps a stricter wbps the platform set for the device and says
// so; update writes the new policy's value.
TEST_F(ResourcesV2, AttachKeepsAStricterIoMaxAndUpdateAppliesTheNewOne) {
  if (!Cgroup2Offers("io")) GTEST_SKIP() << "no io controller in cgroup2 at " << Cgroup2Mount();
  LoopDisk disk;
  ASSERT_TRUE(disk.ok()) << disk.log();
  const std::string id = WholeDiskOf(disk.mnt());
  TestCgroup cg("res-io");
  { std::ofstream(Cgroup2Mount() + "/cgroup.subtree_control") << "+io"; }  // as a platform would
  const std::string files = "  files:\n    include: [runtime-minimal]\n    write: [" + disk.mnt() + "]\n";
  PolicyFile p2m(Policy("io2m", "    ioWriteBytesPerSecond: 2Mi\n") + files);
  PolicyFile p512k(Policy("io512k", "    ioWriteBytesPerSecond: 512Ki\n") + files);
  // Negative control: no limit for the device before.
  EXPECT_FALSE(Has(ReadTrimmed(cg.path() + "/io.max"), id + " ")) << ReadTrimmed(cg.path() + "/io.max");
  { std::ofstream(cg.path() + "/io.max") << id + " wbps=1048576"; }
  CommandResult a = Cordon({"attach", "--cgroup", cg.path(), "--policy", p2m.path(), "--allow-degraded"});
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_TRUE(Has(a.out + a.err, "io.max: the platform's stricter '" + id + " wbps=1048576' applies (policy: '" + id +
                                     " wbps=2097152')"))
      << a.out << a.err;
  EXPECT_TRUE(Has(ReadTrimmed(cg.path() + "/io.max"), id + " rbps=max wbps=1048576 "))
      << ReadTrimmed(cg.path() + "/io.max");
  CommandResult u = Cordon({"update", "--cgroup", cg.path(), "--policy", p512k.path(), "--allow-degraded"});
  ASSERT_EQ(u.status, 0) << u.err;
  EXPECT_TRUE(Has(u.out + u.err, "io.max " + id + " wbps=524288 enforced (cgroup v2, policy)")) << u.out << u.err;
  EXPECT_TRUE(Has(ReadTrimmed(cg.path() + "/io.max"), id + " rbps=max wbps=524288 "))
      << ReadTrimmed(cg.path() + "/io.max");
  CommandResult d = Cordon({"detach", "--cgroup", cg.path()});
  EXPECT_EQ(d.status, 0) << d.err;
}

TEST_F(ResourcesV2, DoctorShowsTheLimitsEnforced) {
  CommandResult d = Cordon({"doctor", "--json"});
  ASSERT_TRUE(d.status == 0 || d.status == 1) << d.err;
  for (const char* kind : {"memory", "pids", "cpu", "io"})
    EXPECT_TRUE(Has(d.out, std::string("{\"name\":\"") + kind + "\",\"status\":\"enforced\",\"how\":\"cgroup v2"))
        << kind << ": " << d.out;
}

class ResourcesHybrid : public AuditDir {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "integration tests need root";
    if (Cgroup2Offers("pids")) GTEST_SKIP() << "cgroup2 has the pids controller here (ResourcesV2 runs)";
    AuditDir::SetUp();
  }
};

// The mount point of the cgroup v1 hierarchy of `controller` (from
// /proc/self/mountinfo), "" if none has it.
std::string V1Mount(const std::string& controller) {
  std::istringstream mounts(ReadTrimmed("/proc/self/mountinfo"));
  for (std::string line; std::getline(mounts, line);) {
    std::istringstream head(line.substr(0, line.find(" - "))), tail(line.substr(line.find(" - ") + 3));
    std::string id, parent, dev, root, mountpoint, fstype, source, options;
    head >> id >> parent >> dev >> root >> mountpoint;
    tail >> fstype >> source >> options;
    if (fstype == "cgroup" && root == "/" && Has("," + options + ",", "," + controller + ",")) return mountpoint;
  }
  return "";
}

// This process's cgroup directory in the cgroup v1 hierarchy of
// `controller` (/proc/self/cgroup), "" if no v1 hierarchy has it. cordon run
// makes its v1 cgroups below it: <dir>/cordon/run-<pid>-<suffix>.
std::string OwnV1Dir(const std::string& controller) {
  std::string path;
  std::istringstream cgroups(ReadTrimmed("/proc/self/cgroup"));
  for (std::string line; std::getline(cgroups, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    std::istringstream list(line.substr(a + 1, b - a - 1));
    for (std::string c; std::getline(list, c, ',');)
      if (c == controller) path = line.substr(b + 1);
  }
  const std::string mount = V1Mount(controller);
  if (path.empty() || mount.empty()) return "";
  return path == "/" ? mount : mount + path;
}

// The run cgroups cordon left in the v1 hierarchies of memory, pids, cpu and blkio
// (none after every run, whichever way it ended).
std::vector<std::string> LeftV1Cgroups() {
  std::vector<std::string> left;
  for (const char* controller : {"memory", "pids", "cpu", "blkio"}) {
    const std::string parent = OwnV1Dir(controller) + "/cordon";
    if (DIR* d = ::opendir(parent.c_str())) {
      while (dirent* e = ::readdir(d))
        if (std::string(e->d_name).rfind("run-", 0) == 0) left.push_back(parent + "/" + e->d_name);
      ::closedir(d);
    }
  }
  return left;
}

std::string Joined(const std::vector<std::string>& list) {
  std::string out;
  for (const auto& s : list) out += s + " ";
  return out;
}

// Spins in two processes for about 2 s of wall time each; prints the CPU
// they used per second of wall time ("ratio 1.93": about two cores).
const char* kSpin =
    "import os, time\n"
    "t0 = time.monotonic()\n"
    "kids = []\n"
    "for i in range(2):\n"
    "  pid = os.fork()\n"
    "  if pid == 0:\n"
    "    end = time.monotonic() + 2\n"
    "    while time.monotonic() < end: pass\n"
    "    os._exit(0)\n"
    "  kids.append(pid)\n"
    "for k in kids: os.waitpid(k, 0)\n"
    "t = os.times()\n"
    "print('ratio %.3f' % ((t.children_user + t.children_system) / (time.monotonic() - t0)))\n";

TEST_F(ResourcesHybrid, ForkBombStopsAtV1PidsMaxWithEagain) {
  if (OwnV1Dir("pids").empty()) GTEST_SKIP() << "no cgroup v1 pids hierarchy";
  ASSERT_TRUE(LeftV1Cgroups().empty()) << Joined(LeftV1Cgroups());
  PolicyFile limited(Policy("pids16", "    pids: 16\n"));
  CommandResult r = RunCmd(limited.path(), {"/usr/bin/python3", "-c", kForks});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(Has(r.err, "pids.max 16 enforced (cgroup v1 pids.max 16)")) << r.err;
  EXPECT_FALSE(Has(r.err, "NOT enforced")) << r.err;
  int forks = -1, err = -1;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "forks %d errno %d", &forks, &err), 2) << r.out;
  EXPECT_EQ(err, EAGAIN) << r.out;
  EXPECT_GE(forks, 1) << r.out;
  EXPECT_LT(forks, 16) << "python itself is one of the 16\n" << r.out;
  EXPECT_TRUE(Has(r.err, " of 16 pids")) << "the summary's peak line\n" << r.err;
  EXPECT_TRUE(LeftV1Cgroups().empty()) << Joined(LeftV1Cgroups());

  // Negative control: the same forks without the limit all succeed.
  PolicyFile unlimited(Policy("nolimit", ""));
  CommandResult c = RunCmd(unlimited.path(), {"/usr/bin/python3", "-c", kForks});
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_TRUE(Has(c.out, "forks 40 errno 0")) << c.out;
  EXPECT_TRUE(LeftV1Cgroups().empty()) << Joined(LeftV1Cgroups());
}

TEST_F(ResourcesHybrid, AllocationBeyondV1MemoryLimitIsOomKilled) {
  if (OwnV1Dir("memory").empty()) GTEST_SKIP() << "no cgroup v1 memory hierarchy";
  PolicyFile limited(Policy("mem32", "    memory: 32Mi\n    swap: 0\n"));
  CommandResult r = RunCmd(limited.path(), {"/usr/bin/python3", "-c", kAllocate});
  EXPECT_EQ(r.status, 125) << "killed by the memory limit (README)\n" << r.out << r.err;
  EXPECT_FALSE(Has(r.out, "touched")) << r.out;
  EXPECT_TRUE(Has(r.err, "memory.max 33554432 enforced (cgroup v1 memory.limit_in_bytes 33554432)")) << r.err;
  EXPECT_TRUE(Has(r.err, " MiB of 32 MiB")) << "the summary's peak line\n" << r.err;
  EXPECT_TRUE(LeftV1Cgroups().empty()) << Joined(LeftV1Cgroups());

  // The kill is a resource.memory event (read from memory.oom_control at
  // the end) naming the process killed (bpf/oom: its cgroup on the unified
  // hierarchy is the run's), not the idle one beside it.
  CommandResult named = RunCmd(limited.path(), {"/usr/bin/python3", "-c", kAllocateBesideIdle});
  EXPECT_EQ(named.status, 125) << named.out << named.err;
  ExpectOnlyTheAllocatorNamed(AuditFileEvents(dir_ + "/audit1.jsonl"), named.out, Slurp(dir_ + "/audit1.jsonl"));
  EXPECT_TRUE(LeftV1Cgroups().empty()) << Joined(LeftV1Cgroups());

  // Negative control: the same allocation without the limit succeeds.
  PolicyFile unlimited(Policy("nolimit", ""));
  CommandResult c = RunCmd(unlimited.path(), {"/usr/bin/python3", "-c", kAllocate});
  EXPECT_EQ(c.status, 0) << c.err;
  EXPECT_TRUE(Has(c.out, "touched 67108864")) << c.out;
}

// The CPU used per second of wall time, measured by the command itself: a
// ratio with a wide margin, not a timing.
TEST_F(ResourcesHybrid, CpuSpinnersAreHeldNearTheV1Quota) {
  if (OwnV1Dir("cpu").empty()) GTEST_SKIP() << "no cgroup v1 cpu hierarchy";
  // Both runs in a v1 cpu cgroup (cpuWeight 10000: cpu.shares 102400) under
  // the runs' v1 parent (<own cpu cgroup>/cordon), made here before each run
  // with the most weight (cordon keeps a parent it finds and removes it when
  // empty after the run): on a machine busy with other work (CI: VMs and a
  // build beside the tests) that parent competed at 1024 shares with every
  // other group and autogroup, and the unlimited control got 0.16 to 0.36 of
  // a core in three tries; here, beside six spinners in sessions of their own,
  // 0.28. A weight does not lift a cfs quota: the limited run is held at it
  // all the same.
  const std::string parent = OwnV1Dir("cpu") + "/cordon";
  auto heavy_run = [&](const std::string& policy) {
    EXPECT_TRUE(::mkdir(parent.c_str(), 0755) == 0 || errno == EEXIST) << parent;
    std::ofstream(parent + "/cpu.shares") << 262144;
    EXPECT_EQ(ReadTrimmed(parent + "/cpu.shares"), "262144");
    CommandResult result = RunCmd(policy, {"/usr/bin/python3", "-c", kSpin});
    ::rmdir(parent.c_str());  // as cordon does when it is empty
    return result;
  };
  PolicyFile limited(Policy("cpu01", "    cpu: \"0.1\"\n    cpuWeight: 10000\n"));
  CommandResult r = heavy_run(limited.path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(Has(r.err, "cpu.max 10000 100000 enforced (cgroup v1 cpu.cfs_quota_us 10000)")) << r.err;
  double limited_ratio = -1, free_ratio = -1;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "ratio %lf", &limited_ratio), 1) << r.out;
  EXPECT_LE(limited_ratio, 0.15) << "0.1 of a core at most (the quota), with a wide margin\n" << r.err;
  EXPECT_TRUE(LeftV1Cgroups().empty()) << Joined(LeftV1Cgroups());

  // Negative control: unlimited, the two spinners use three times the quota.
  // On a machine loaded by other work they may get less of it: up to three
  // tries, the best counts (the limited run above is never retried).
  PolicyFile unlimited(Policy("noquota", "    cpuWeight: 10000\n"));
  std::string tries;
  for (int i = 0; i < 3 && free_ratio < 0.3; ++i) {
    CommandResult c = heavy_run(unlimited.path());
    ASSERT_EQ(c.status, 0) << c.err;
    double ratio = -1;
    ASSERT_EQ(std::sscanf(c.out.c_str(), "ratio %lf", &ratio), 1) << c.out;
    free_ratio = std::max(free_ratio, ratio);
    tries += c.out;
  }
  EXPECT_GE(free_ratio, 0.3) << "two spinners on two cores, unlimited\n" << tries;
}

// ioWriteBytesPerSecond on cgroup v1 (cordon run: blkio.throttle.write_bps_device
// in a blkio cgroup of its own): direct writes to a disk the policy lets the
// command write are held near the limit, measured by the command itself (a
// ratio with a wide margin, not a timing). v1 does not charge buffered
// writes' writeback to the cgroup: the outcome says "direct I/O only".
TEST_F(ResourcesHybrid, DirectWritesAreHeldNearTheV1WriteLimit) {
  if (OwnV1Dir("blkio").empty()) GTEST_SKIP() << "no cgroup v1 blkio hierarchy";
  char tmpl[] = "/var/tmp/cordon-io-XXXXXX";  // on a disk (the host's /tmp may be a tmpfs)
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ASSERT_EQ(::chmod(dir.c_str(), 01777), 0);  // the command's dynamic uid writes there
  const std::string disk = WholeDiskOf(dir);
  if (disk.empty()) {
    ::rmdir(dir.c_str());
    GTEST_SKIP() << "/var/tmp is not on a block device here";
  }
  const std::string files = "  files:\n    include: [runtime-minimal, python3]\n    write: [" + dir + "]\n";
  PolicyFile limited(Policy("io2m", "    ioWriteBytesPerSecond: 2Mi\n") + files);
  PolicyFile unlimited(Policy("nolimit", "") + files);
  constexpr double kLimit = 2 << 20;
  std::string log;
  const double rate = WriteRate(limited.path(), dir + "/out", "direct", &log);
  // Negative control: without the limit the same writes go well above it
  // (up to three tries on a loaded machine; the limited run is never retried).
  std::string free_log;
  const double free_rate = WriteRate(unlimited.path(), dir + "/out", "direct", &free_log, 3, 3 * kLimit);
  ::rmdir(dir.c_str());
  EXPECT_TRUE(Has(log, "io.max " + disk + " wbps=2097152 enforced (cgroup v1 blkio.throttle.write_bps_device " + disk +
                           " 2097152; direct I/O only"))
      << log;
  EXPECT_FALSE(Has(log, "NOT enforced")) << log;
  ASSERT_GT(rate, 0) << log;
  EXPECT_LE(rate / kLimit, 1.5) << "direct writes at most ~the limit\n" << log;
  EXPECT_GE(free_rate / kLimit, 3) << "negative control: unlimited\n" << free_log;
  EXPECT_TRUE(LeftV1Cgroups().empty()) << Joined(LeftV1Cgroups());
}

// A root command (no capability, but uid 0 owns the v1 cgroup files) could
// write "max" to its v1 pids.max or move itself to the v1 root cgroup:
// cordon run's read-only /sys covers the v1 mounts too (EROFS).
TEST_F(ResourcesHybrid, ARootCommandCannotRaiseItsV1Limits) {
  const std::string pids = OwnV1Dir("pids"), memory = OwnV1Dir("memory");
  if (pids.empty() || memory.empty()) GTEST_SKIP() << "no cgroup v1 pids and memory hierarchies";
  // Negative control: root outside any sandbox writes a v1 cgroup's pids.max.
  const std::string probe = pids + "/cordon-test-raise-" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(probe.c_str(), 0755), 0) << probe;
  { std::ofstream(probe + "/pids.max") << "16"; }
  EXPECT_EQ(ReadTrimmed(probe + "/pids.max"), "16");
  { std::ofstream(probe + "/pids.max") << "max"; }
  EXPECT_EQ(ReadTrimmed(probe + "/pids.max"), "max") << "negative control: root writes pids.max unconfined";
  ::rmdir(probe.c_str());
  // And a v1 blkio cgroup's write limit (ioWriteBytesPerSecond), where there is one.
  const std::string blkio = OwnV1Dir("blkio"), disk = WholeDiskOf("/");
  const bool io = !blkio.empty() && !disk.empty();
  if (io) {
    const std::string probe_io = blkio + "/cordon-test-raise-" + std::to_string(::getpid());
    ASSERT_EQ(::mkdir(probe_io.c_str(), 0755), 0) << probe_io;
    { std::ofstream(probe_io + "/blkio.throttle.write_bps_device") << disk + " 1048576"; }
    EXPECT_EQ(ReadTrimmed(probe_io + "/blkio.throttle.write_bps_device"), disk + " 1048576");
    { std::ofstream(probe_io + "/blkio.throttle.write_bps_device") << disk + " 0"; }
    EXPECT_EQ(ReadTrimmed(probe_io + "/blkio.throttle.write_bps_device"), "")
        << "negative control: root lifts a blkio write limit unconfined";
    ::rmdir(probe_io.c_str());
  }

  // Each write: "<what> <errno>" (0: it went through).
  const std::string raise =
      "import os\n"
      "def own(c):\n"
      "  for l in open('/proc/self/cgroup').read().splitlines():\n"
      "    i, cs, p = l.split(':', 2)\n"
      "    if c in cs.split(','): return p\n"
      "def write(what, path, data):\n"
      "  try:\n"
      "    open(path, 'w').write(data)\n"
      "    print(what, 0)\n"
      "  except OSError as e:\n"
      "    print(what, e.errno)\n"
      "write('pids.max', '" +
      V1Mount("pids") +
      "' + own('pids') + '/pids.max', 'max')\n"
      "write('memory', '" +
      V1Mount("memory") +
      "' + own('memory') + '/memory.limit_in_bytes', '-1')\n"
      "write('procs', '" +
      V1Mount("pids") + "/cgroup.procs', str(os.getpid()))\n" +
      (io ? "write('blkio', '" + V1Mount("blkio") + "' + own('blkio') + '/blkio.throttle.write_bps_device', '" + disk +
                " 0')\n"
          : "") +
      kForks;
  PolicyFile as_root(
      Policy("root", std::string("    pids: 16\n    memory: 64Mi\n") + (io ? "    ioWriteBytesPerSecond: 2Mi\n" : "")) +
      "  runAs: root\n");
  CommandResult r = RunCmd(as_root.path(), {"/usr/bin/python3", "-c", raise}, true);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(Has(r.out, "pids.max " + std::to_string(EROFS))) << r.out;
  EXPECT_TRUE(Has(r.out, "memory " + std::to_string(EROFS))) << r.out;
  EXPECT_TRUE(Has(r.out, "procs " + std::to_string(EROFS))) << r.out;
  if (io) {
    EXPECT_TRUE(Has(r.out, "blkio " + std::to_string(EROFS))) << r.out;
  }
  int forks = -1, err = -1;
  const size_t at = r.out.find("forks ");
  ASSERT_NE(at, std::string::npos) << r.out;
  ASSERT_EQ(std::sscanf(r.out.c_str() + at, "forks %d errno %d", &forks, &err), 2) << r.out;
  EXPECT_EQ(err, EAGAIN) << "the limit holds\n" << r.out;
  EXPECT_LT(forks, 16) << r.out;
  EXPECT_TRUE(LeftV1Cgroups().empty()) << Joined(LeftV1Cgroups());
}

// A run whose command never starts (its program cannot be executed in its
// mount namespace: it is below the host's /tmp, which the scratch covers)
// fails after its v1 cgroups were made and the child placed: none is left.
TEST_F(ResourcesHybrid, AFailedRunLeavesNoV1Cgroup) {
  if (OwnV1Dir("pids").empty()) GTEST_SKIP() << "no cgroup v1 pids hierarchy";
  const std::string program = dir_ + "/hidden";
  { std::ofstream(program) << "#!/bin/sh\necho ran\n"; }
  ASSERT_EQ(::chmod(program.c_str(), 0755), 0);
  PolicyFile limited(Policy("pids16", "    pids: 16\n    memory: 64Mi\n    cpu: 1\n"));
  CommandResult r = RunCmd(limited.path(), {program});
  ::unlink(program.c_str());
  EXPECT_EQ(r.status, 127) << r.err;
  EXPECT_FALSE(Has(r.out, "ran")) << r.out;
  EXPECT_TRUE(Has(r.err, "enforced (cgroup v1 pids.max 16)")) << "the v1 cgroups were made\n" << r.err;
  EXPECT_TRUE(LeftV1Cgroups().empty()) << Joined(LeftV1Cgroups());
}

TEST_F(ResourcesHybrid, RunWarnsPerLimitItCannotEnforceAndRunsTheCommand) {
  PolicyFile limited(Policy("limits", "    memory: 32Mi\n    memoryHigh: 16Mi\n    pids: 16\n    disk: 1Gi\n"));
  CommandResult r = RunCmd(limited.path(), {"/bin/echo", "ran"}, true);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "ran\n");
  if (!OwnV1Dir("memory").empty()) {
    EXPECT_TRUE(Has(r.err,
                    "warning: NOT enforced: resource limit memory.high: cgroup v1 (where the memory "
                    "controller is here) has no memory.high"))
        << r.err;
  }
  if (OwnV1Dir("pids").empty()) {
    EXPECT_TRUE(Has(
        r.err, "warning: NOT enforced: resource limit pids.max: no pids controller in cgroup2 at " + Cgroup2Mount()))
        << r.err;
  } else {
    EXPECT_FALSE(Has(r.err, "resource limit pids.max")) << "enforced on v1\n" << r.err;
  }
  EXPECT_TRUE(Has(r.err,
                  "warning: disk 1Gi: enforced for the scratch (tmpfs size of /tmp and /dev/shm) only; NOT "
                  "enforced for spec.files write paths"))
      << r.err;
  EXPECT_FALSE(Has(r.err, " enforced (cgroup v2")) << r.err;
  EXPECT_TRUE(LeftV1Cgroups().empty()) << Joined(LeftV1Cgroups());
}

// spec.resources.disk sizes cordon run's scratch tmpfs (/tmp, /dev/shm):
// writes beyond it fail with ENOSPC (host and VMs).
class ScratchDisk : public AuditDir {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "integration tests need root";
    AuditDir::SetUp();
  }
};

TEST_F(ScratchDisk, WritesBeyondDiskFailWithEnospc) {
  // Writes 2 MiB in 64 KiB pieces to /tmp; prints what got written and the errno.
  const char* write2m =
      "import os\n"
      "n, err = 0, 0\n"
      "with open('/tmp/fill', 'wb', buffering=0) as f:\n"
      "  try:\n"
      "    while n < (2 << 20):\n"
      "      n += f.write(b'x' * 65536)\n"
      "      os.fsync(f.fileno())\n"
      "  except OSError as e:\n"
      "    err = e.errno\n"
      "print('wrote', n, 'errno', err)\n";
  PolicyFile limited(Policy("disk1m", "    disk: 1Mi\n"));
  CommandResult r = RunCmd(limited.path(), {"/usr/bin/python3", "-c", write2m});
  ASSERT_EQ(r.status, 0) << r.err;
  long wrote = -1;
  int err = -1;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "wrote %ld errno %d", &wrote, &err), 2) << r.out;
  EXPECT_EQ(err, ENOSPC) << r.out;
  EXPECT_GE(wrote, 512 << 10) << r.out;
  EXPECT_LE(wrote, 1 << 20) << r.out;
  EXPECT_TRUE(Has(r.err, "disk 1Mi: enforced for the scratch")) << r.err;

  // Negative control: without disk the same 2 MiB are written.
  PolicyFile unlimited(Policy("nolimit", ""));
  CommandResult c = RunCmd(unlimited.path(), {"/usr/bin/python3", "-c", write2m});
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_TRUE(Has(c.out, "wrote 2097152 errno 0")) << c.out;
}

// wallTime is cordon run's own clock: it needs no controller (host and VMs).
class WallTime : public AuditDir {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "integration tests need root";
    AuditDir::SetUp();
  }
};

TEST_F(WallTime, EndsTheCommandWithItsOwnExitStatusAndOneEvent) {
  PolicyFile timed(Policy("timed", "    wallTime: 1s\n"));
  // Negative control: a command that ends within its wallTime keeps its own status.
  CommandResult quick = RunCmd(timed.path(), {"/bin/sh", "-c", "exit 3"});
  EXPECT_EQ(quick.status, 3) << quick.err;
  EXPECT_TRUE(Kind(AuditFileEvents(dir_ + "/audit0.jsonl"), "resource.walltime").empty());
  EXPECT_TRUE(Has(quick.err, "wallTime 1 s enforced by cordon run")) << quick.err;
  EXPECT_FALSE(Has(quick.err, "NOT enforced: resource limit spec.resources.wallTime")) << quick.err;

  // SIGTERM at 1 s: sleep dies of it.
  CommandResult slow = RunCmd(timed.path(), {"/bin/sleep", "30"});
  EXPECT_EQ(slow.status, 124) << slow.err;
  auto ended = Kind(AuditFileEvents(dir_ + "/audit1.jsonl"), "resource.walltime");
  ASSERT_EQ(ended.size(), 1u) << slow.err;
  EXPECT_EQ(ended[0].verdict(), "killed");
  EXPECT_EQ(ended[0].resource().limit(), 1u);
  EXPECT_EQ(ended[0].sandbox().rfind("run-", 0), 0u) << ended[0].sandbox();
  EXPECT_TRUE(Has(slow.err, "resource.walltime x1")) << slow.err;

  // A command that ignores SIGTERM is killed after the grace.
  CommandResult stubborn = RunCmd(timed.path(), {"/bin/sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"});
  EXPECT_EQ(stubborn.status, 124) << stubborn.err;
  EXPECT_EQ(Kind(AuditFileEvents(dir_ + "/audit2.jsonl"), "resource.walltime").size(), 1u);
}

// cordon status reads each sandbox's use from its cgroup files (issue 17):
// CPU everywhere (cpu.stat is a core cgroup2 file), memory and pids where
// the controllers are.
class ResourceUse : public AuditDir {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "integration tests need root";
    AuditDir::SetUp();
  }
};

// The "resources" object of sandbox `id` in `cordon status --json`.
std::string ResourcesOf(const std::string& json, uint64_t id) {
  size_t at = json.find("{\"id\":" + std::to_string(id) + ",");
  if (at == std::string::npos) return "";
  at = json.find("\"resources\":{", at);
  if (at == std::string::npos) return "";
  at += 12;
  int depth = 0;
  for (size_t i = at; i < json.size(); ++i) {
    depth += json[i] == '{' ? 1 : json[i] == '}' ? -1 : 0;
    if (depth == 0) return json.substr(at, i + 1 - at);
  }
  return "";
}

uint64_t Member(const std::string& object, const std::string& name) {
  size_t at = object.find("\"" + name + "\":");
  return at == std::string::npos ? UINT64_MAX : std::stoull(object.substr(at + name.size() + 3));
}

TEST_F(ResourceUse, StatusShowsTheSandboxsUseAndLimits) {
  const bool v2 = Cgroup2Offers("pids") && Cgroup2Offers("memory");
  TestCgroup busy("res-busy"), idle("res-idle");
  PolicyFile policy(Policy("use", v2 ? "    pids: 16\n    memory: 64Mi\n" : ""));
  for (TestCgroup* cg : {&busy, &idle}) {
    CommandResult a = Cordon({"attach", "--cgroup", cg->path(), "--policy", policy.path(), "--allow-degraded"});
    ASSERT_EQ(a.status, 0) << a.err;
  }
  // 100 ms of CPU in the busy one only.
  ASSERT_EQ(RunInCgroup(busy.path(), [] {
              struct timespec ts;
              volatile uint64_t x = 0;
              do {
                for (int i = 0; i < 100000; ++i) x = x + static_cast<uint64_t>(i);
                ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
              } while (ts.tv_sec == 0 && ts.tv_nsec < 100000000);
              return 0;
            }),
            0);
  CommandResult s = Cordon({"status", "--json"});
  ASSERT_EQ(s.status, 0) << s.err;
  const std::string b = ResourcesOf(s.out, busy.id()), i = ResourcesOf(s.out, idle.id());
  ASSERT_FALSE(b.empty()) << s.out;
  ASSERT_FALSE(i.empty()) << s.out;
  EXPECT_GE(Member(b, "usageUsec"), 90000u) << b;
  EXPECT_EQ(Member(i, "usageUsec"), 0u) << "negative control: nothing ran there\n" << i;
  if (v2) {
    EXPECT_NE(b.find("\"pids\":{\"current\":0,"), std::string::npos) << b;
    EXPECT_EQ(Member(b.substr(b.find("\"pids\"")), "limit"), 16u) << b;
    EXPECT_EQ(Member(b.substr(b.find("\"memory\"")), "limit"), 64u << 20) << b;
  }
  CommandResult text = Cordon({"status"});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_TRUE(Has(text.out, "  resources: " + std::string(v2 ? "memory " : "cpu "))) << text.out;
  if (v2) {
    EXPECT_TRUE(Has(text.out, "of 64 MiB, pids 0 of 16, cpu ")) << text.out;
  }
}

TEST_F(ResourcesHybrid, DoctorShowsPerLimitWhereItIsEnforced) {
  CommandResult d = Cordon({"doctor", "--json"});
  ASSERT_TRUE(d.status == 0 || d.status == 1) << d.err;
  for (const char* kind : {"memory", "pids", "cpu"}) {
    const std::string mount = V1Mount(kind);
    if (mount.empty()) {
      EXPECT_TRUE(Has(d.out, std::string("{\"name\":\"") + kind + "\",\"status\":\"unavailable\",\"how\":\"no " + kind +
                                 " controller in cgroup2 at " + Cgroup2Mount()))
          << kind << ": " << d.out;
    } else {
      EXPECT_TRUE(Has(d.out, std::string("{\"name\":\"") + kind +
                                 "\",\"status\":\"enforced for run\",\"how\":\"cgroup v1 at " + mount + ": "))
          << kind << ": " << d.out;
    }
  }
  if (!V1Mount("pids").empty()) {
    EXPECT_TRUE(Has(d.out, "cordon attach: no pids controller in cgroup2 at " + Cgroup2Mount() +
                               " (on a hybrid host it is on cgroup v1, where only cordon run places its command)\","
                               "\"run\":\"enforced\",\"attach\":\"unavailable\"}"))
        << d.out;
  }
  // ioWriteBytesPerSecond: v1 blkio for cordon run, direct I/O only.
  if (V1Mount("blkio").empty()) {
    EXPECT_TRUE(Has(d.out, "{\"name\":\"io\",\"status\":\"unavailable\",\"how\":\"no io controller in cgroup2"))
        << d.out;
  } else {
    EXPECT_TRUE(Has(d.out, "{\"name\":\"io\",\"status\":\"enforced for run\",\"how\":\"cgroup v1 at " +
                               V1Mount("blkio") + ": blkio.throttle.write_bps_device, direct I/O only"))
        << d.out;
  }
  EXPECT_TRUE(Has(d.out, "{\"name\":\"disk\",\"status\":\"degraded\",\"how\":\"cordon run: the size of its scratch"))
      << d.out;
  EXPECT_FALSE(Has(d.out, "\"status\":\"enforced\",\"how\":\"cgroup v2")) << d.out;
  CommandResult text = Cordon({"doctor"});
  if (!V1Mount("pids").empty()) {
    EXPECT_TRUE(Has(text.out, "  pids                     enforced for run cgroup v1 at ")) << text.out;
  }
}

TEST_F(ResourcesHybrid, AttachRefusesUnlessDegradedAllowedAndSaysWhichLimits) {
  TestCgroup cg("res-hybrid");
  PolicyFile limited(Policy("limits", "    pids: 16\n"));
  CommandResult refused = Cordon({"attach", "--cgroup", cg.path(), "--policy", limited.path()});
  EXPECT_NE(refused.status, 0);
  EXPECT_TRUE(Has(refused.err, "resource limit pids.max: no pids controller in cgroup2 at " + Cgroup2Mount()))
      << refused.err;
  EXPECT_TRUE(Has(refused.err, "Nothing attached")) << refused.err;
  CommandResult none = Cordon({"status"});
  EXPECT_FALSE(Has(none.out, "res-hybrid")) << none.out;

  // Negative control: the same attach, degraded enforcement allowed, attaches and names the limit.
  CommandResult a = Cordon({"attach", "--cgroup", cg.path(), "--policy", limited.path(), "--allow-degraded"});
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_TRUE(Has(a.out + a.err, "pids.max 16 NOT enforced: no pids controller in cgroup2")) << a.out << a.err;
  CommandResult status = Cordon({"status"});
  EXPECT_TRUE(Has(status.out, "res-hybrid")) << status.out;
}

// ioWriteBytesPerSecond through attach on a hybrid host: io is not in
// cgroup2, so each disk's io.max is degraded enforcement, named per device.
TEST_F(ResourcesHybrid, AttachRefusesAnIoLimitItCannotSetNamingTheDevice) {
  const std::string disk = WholeDiskOf("/");
  if (disk.empty()) GTEST_SKIP() << "/ is not on a block device here";
  TestCgroup cg("res-hybrid-io");
  PolicyFile limited(Policy("io2m", "    ioWriteBytesPerSecond: 2Mi\n"));
  CommandResult refused = Cordon({"attach", "--cgroup", cg.path(), "--policy", limited.path()});
  EXPECT_NE(refused.status, 0);
  EXPECT_TRUE(Has(refused.err, "resource limit io.max " + disk + ": no io controller in cgroup2 at " + Cgroup2Mount()))
      << refused.err;
  EXPECT_TRUE(Has(refused.err, "Nothing attached")) << refused.err;

  // Negative control: degraded enforcement allowed, it attaches and names the limit per device.
  CommandResult a = Cordon({"attach", "--cgroup", cg.path(), "--policy", limited.path(), "--allow-degraded"});
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_TRUE(Has(a.out + a.err, "io.max " + disk + " wbps=2097152 NOT enforced: no io controller in cgroup2"))
      << a.out << a.err;
  EXPECT_TRUE(Has(a.out + a.err, "ioWriteBytesPerSecond 2Mi: device " + disk)) << a.out << a.err;
}

}  // namespace
}  // namespace cordon::test
