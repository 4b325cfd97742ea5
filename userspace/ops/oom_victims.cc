#include "ops/oom_victims.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "abi/cordon_oom.h"
#include "cordon_oom.skel.h"
#include "sys/libbpf_log.h"

namespace cordon::ops {
namespace {

struct Recorder {
  cordon_oom* skel = nullptr;  // never destroyed: it records for the process's life
  std::string why_not;
};

Recorder& TheRecorder() {
  static Recorder recorder;
  static std::once_flag once;
  std::call_once(once, [] {
    LibbpfLogCapture log;
    cordon_oom* skel = cordon_oom__open_and_load();
    if (!skel) {
      recorder.why_not =
          "the OOM victim program did not load (" + std::string(std::strerror(errno)) + ")" + log.Tail(4);
      return;
    }
    if (int err = cordon_oom__attach(skel)) {
      recorder.why_not =
          "the OOM victim program did not attach (" + std::string(std::strerror(-err)) + ")" + log.Tail(4);
      cordon_oom__destroy(skel);
      return;
    }
    recorder.skel = skel;
  });
  return recorder;
}

void AddSubtree(const std::string& dir, std::vector<uint64_t>* ids, int depth) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return;
  ids->push_back(st.st_ino);
  if (depth >= 64) return;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = ::readdir(d))
    if (e->d_type == DT_DIR && std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
      AddSubtree(dir + "/" + e->d_name, ids, depth + 1);
  ::closedir(d);
}

}  // namespace

const std::string& OomVictimRecorder() { return TheRecorder().why_not; }

std::vector<uint64_t> CgroupSubtreeIds(const std::string& cgroup2_dir) {
  std::vector<uint64_t> ids;
  AddSubtree(cgroup2_dir, &ids, 0);
  return ids;
}

std::vector<OomVictim> TakeOomVictims(const std::vector<uint64_t>& ids) {
  std::vector<OomVictim> out;
  Recorder& r = TheRecorder();
  if (!r.skel || ids.empty()) return out;
  const int fd = bpf_map__fd(r.skel->maps.oom_victims);
  // Keys first, then each one looked up and deleted: a delete during the
  // walk would restart it. The map holds at most CORDON_OOM_VICTIMS_MAX.
  std::vector<cordon_oom_victim_key> keys;
  cordon_oom_victim_key key = {}, next;
  const void* prev = nullptr;
  // A key evicted under the walk restarts it from the beginning (the map is
  // the host's, written by every OOM kill): the steps are bounded too.
  for (size_t steps = 0; steps < 4 * CORDON_OOM_VICTIMS_MAX && keys.size() < CORDON_OOM_VICTIMS_MAX &&
                         bpf_map_get_next_key(fd, prev, &next) == 0;
       ++steps) {
    if (std::find(ids.begin(), ids.end(), next.cgroup_id) != ids.end()) keys.push_back(next);
    key = next;
    prev = &key;
  }
  for (const auto& k : keys) {
    cordon_oom_victim v = {};
    // Lookup then delete: another watcher of the same subtree (a nested
    // sandbox) may take it in between; only the one whose delete succeeds
    // reports it.
    if (bpf_map_lookup_elem(fd, &k, &v) != 0 || bpf_map_delete_elem(fd, &k) != 0) continue;
    OomVictim o;
    o.cgroup_id = k.cgroup_id;
    o.pid = k.tgid;
    o.tid = v.tid;
    o.uid = v.uid;
    o.comm.assign(v.comm, strnlen(v.comm, sizeof v.comm));
    o.boot_ns = static_cast<int64_t>(v.boot_ns);
    out.push_back(std::move(o));
  }
  std::sort(out.begin(), out.end(), [](const OomVictim& a, const OomVictim& b) { return a.boot_ns < b.boot_ns; });
  return out;
}

}  // namespace cordon::ops
