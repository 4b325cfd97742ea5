// sys/block_device.h on what this machine has: the root file system on a
// whole disk (the host: ext4 on /dev/vda; the test VMs: 9p, no device),
// /proc and tmpfs mounts without a device, partitions where sysfs lists any.
#include "sys/block_device.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <string>

#include "util/fs.h"

namespace cordon {
namespace {

std::vector<MountEntry> Mounts() {
  auto mounts = ReadMountTable();
  EXPECT_TRUE(mounts) << mounts.error().ToString();
  return mounts ? *mounts : std::vector<MountEntry>{};
}

// The first mount of `fstype`, "" if none.
std::string MountOf(const std::string& fstype) {
  for (const MountEntry& m : Mounts())
    if (m.fstype == fstype) return m.mountpoint;
  return "";
}

TEST(BlockDevice, TheRootFileSystemMapsToItsWholeDisk) {
  struct stat st;
  ASSERT_EQ(::stat("/", &st), 0);
  if (::major(st.st_dev) == 0) GTEST_SKIP() << "/ has no block device here (a VM's 9p root)";
  const WriteDevices io = ResolveWriteDevices({"/etc"}, Mounts());
  ASSERT_EQ(io.devices.size(), 1u) << "/etc is on the root's disk only";
  const BlockDevice& d = io.devices[0];
  // The device itself or, for a partition, its disk: never a partition.
  struct stat part;
  EXPECT_NE(::stat(("/sys/dev/block/" + d.Id() + "/partition").c_str(), &part), 0) << d.Id();
  auto dev = ReadFile("/sys/dev/block/" + d.Id() + "/dev");
  ASSERT_TRUE(dev) << dev.error().ToString();
  EXPECT_EQ(*dev, d.Id() + "\n");
  EXPECT_FALSE(d.name.empty());
  EXPECT_EQ(d.paths, std::vector<std::string>{"/etc"});
  EXPECT_TRUE(io.not_applicable.empty());
}

TEST(BlockDevice, APathNotYetCreatedIsOnItsAncestorsDevice) {
  struct stat st;
  ASSERT_EQ(::stat("/etc", &st), 0);
  if (::major(st.st_dev) == 0) GTEST_SKIP() << "/etc has no block device here";
  const WriteDevices made = ResolveWriteDevices({"/etc/cordon-absent-dir/file"}, Mounts());
  const WriteDevices there = ResolveWriteDevices({"/etc"}, Mounts());
  ASSERT_EQ(made.devices.size(), 1u);
  ASSERT_EQ(there.devices.size(), 1u);
  EXPECT_EQ(made.devices[0].Id(), there.devices[0].Id());
  EXPECT_EQ(made.devices[0].paths, std::vector<std::string>{"/etc/cordon-absent-dir/file"});
}

TEST(BlockDevice, ProcAndTmpfsHaveNoDevice) {
  const std::string tmpfs = MountOf("tmpfs");
  ASSERT_FALSE(tmpfs.empty()) << "no tmpfs mounted";
  const WriteDevices io = ResolveWriteDevices({"/proc", tmpfs}, Mounts());
  EXPECT_TRUE(io.devices.empty()) << io.devices[0].Id();
  ASSERT_EQ(io.not_applicable.size(), 2u);
  EXPECT_EQ(io.not_applicable[0].path, "/proc");
  EXPECT_EQ(io.not_applicable[0].reason, "proc at /proc has no block device");
  EXPECT_EQ(io.not_applicable[1].path, tmpfs);
  EXPECT_EQ(io.not_applicable[1].reason.rfind("tmpfs at ", 0), 0u) << io.not_applicable[1].reason;
}

// "/" covers every mount below it: the disks of those on one are found, and
// those without a device below it are not listed as not applicable.
TEST(BlockDevice, MountsBelowAPathAreIncluded) {
  std::vector<std::string> disks;
  for (const MountEntry& m : Mounts()) {
    unsigned major = 0, minor = 0;
    if (std::sscanf(m.dev.c_str(), "%u:%u", &major, &minor) != 2 || major == 0) continue;
    std::string reason;
    if (auto d = WholeDisk(major, minor, &reason)) disks.push_back(d->Id());
  }
  const WriteDevices io = ResolveWriteDevices({"/"}, Mounts());
  for (const auto& id : disks) {
    bool found = false;
    for (const BlockDevice& d : io.devices) found |= d.Id() == id;
    EXPECT_TRUE(found) << id;
  }
  EXPECT_LE(io.not_applicable.size(), 1u) << "only / itself (a VM's 9p root)";
}

// Where sysfs lists a partition, it maps to its parent disk.
TEST(BlockDevice, APartitionMapsToItsDisk) {
  auto names = ListDir("/sys/class/block");
  ASSERT_TRUE(names) << names.error().ToString();
  int checked = 0;
  for (const std::string& name : *names) {
    auto partition = ReadFile("/sys/class/block/" + name + "/partition", 64);
    auto dev = ReadFile("/sys/class/block/" + name + "/dev", 64);
    if (!partition || !dev) continue;
    unsigned major = 0, minor = 0;
    ASSERT_EQ(std::sscanf(dev->c_str(), "%u:%u", &major, &minor), 2) << *dev;
    std::string reason;
    auto disk = WholeDisk(major, minor, &reason);
    ASSERT_TRUE(disk) << reason;
    EXPECT_NE(disk->Id() + "\n", *dev) << name;
    struct stat st;
    EXPECT_EQ(::stat(("/sys/class/block/" + disk->name + "/" + name).c_str(), &st), 0)
        << name << " is below its disk " << disk->name << " in sysfs";
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no partition on this machine";
}

TEST(BlockDevice, ADeviceNodeIsItsDeviceOrNone) {
  const WriteDevices chr = ResolveWriteDevices({"/dev/null"}, Mounts());
  EXPECT_TRUE(chr.devices.empty());
  EXPECT_TRUE(chr.not_applicable.empty()) << "a character device is no disk: nothing to say";
  struct stat st;
  ASSERT_EQ(::stat("/", &st), 0);
  if (::major(st.st_dev) == 0) GTEST_SKIP() << "/ has no block device here";
  // The root's disk's own node, found by its number in sysfs (its uevent names it).
  const std::string sys =
      "/sys/dev/block/" + std::to_string(::major(st.st_dev)) + ":" + std::to_string(::minor(st.st_dev));
  auto uevent = ReadFile(sys + "/uevent");
  ASSERT_TRUE(uevent) << uevent.error().ToString();
  const size_t at = uevent->find("DEVNAME=");
  ASSERT_NE(at, std::string::npos) << *uevent;
  const std::string node = "/dev/" + uevent->substr(at + 8, uevent->find('\n', at) - at - 8);
  const WriteDevices blk = ResolveWriteDevices({node}, Mounts());
  const WriteDevices root = ResolveWriteDevices({"/etc"}, Mounts());
  ASSERT_EQ(blk.devices.size(), 1u) << node;
  ASSERT_EQ(root.devices.size(), 1u);
  EXPECT_EQ(blk.devices[0].Id(), root.devices[0].Id()) << node;
}

TEST(BlockDevice, ACharacterDeviceNumberIsNotABlockDevice) {
  std::string reason;
  EXPECT_FALSE(WholeDisk(0, 5, &reason));
  EXPECT_EQ(reason, "device 0:5 is not a block device (not in /sys/dev/block)");
}

}  // namespace
}  // namespace cordon
