#include "loader/grants.h"

#include "loader/sandbox.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "sys/bpffs.h"

namespace cordon {
namespace {

uint64_t BootNs() {
  struct timespec ts = {};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The key form of an address: IPv4 (and IPv4-mapped IPv6) as ::ffff:a.b.c.d,
// as the programs look destinations up.
Result<cordon_grant_key> KeyOf(int family, const std::array<uint8_t, 16>& address) {
  cordon_grant_key key = {};
  if (family == AF_INET) {
    key.addr[10] = key.addr[11] = 0xff;
    std::memcpy(key.addr + 12, address.data(), 4);
  } else if (family == AF_INET6) {
    std::memcpy(key.addr, address.data(), 16);
  } else {
    return Error{"grant: family " + std::to_string(family) + " is neither AF_INET nor AF_INET6"};
  }
  return key;
}

std::string AddressText(const uint8_t addr[16]) {
  static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  char text[INET6_ADDRSTRLEN] = {};
  if (std::memcmp(addr, kMapped, sizeof kMapped) == 0)
    ::inet_ntop(AF_INET, addr + 12, text, sizeof text);
  else
    ::inet_ntop(AF_INET6, addr, text, sizeof text);
  return text;
}

// A name as the table keeps it: what a DNS name may hold, nothing a terminal
// or a log line would interpret.
Status CheckName(const std::string& name) {
  if (name.empty() || name.size() > kGrantNameMax)
    return Error{"grant: name must be 1 to " + std::to_string(kGrantNameMax) + " characters"};
  for (unsigned char c : name)
    if (!(std::isalnum(c) || c == '.' || c == '-' || c == '_' || c == '*'))
      return Error{"grant: name holds a character a DNS name cannot (byte " + std::to_string(c) + ")"};
  return {};
}

// The keys of a hash map (at most `max`), read before any is changed.
template <typename Key>
std::vector<Key> MapKeys(int map, size_t max) {
  std::vector<Key> keys;
  Key key = {}, next = {};
  const void* prev = nullptr;
  while (keys.size() < max && bpf_map_get_next_key(map, prev, &next) == 0) {
    keys.push_back(next);
    key = next;
    prev = &key;
  }
  return keys;
}

// The sandbox's pinned name table, created on first use.
Result<UniqueFd> NameTable(const std::string& dir, bool create) {
  const std::string path = dir + "/" + CORDON_GRANT_NAMES_PIN;
  UniqueFd fd(bpf_obj_get(path.c_str()));
  if (fd.valid() || errno != ENOENT || !create) {
    if (!fd.valid()) return SysError("open " + path);
    return fd;
  }
  LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_NO_PREALLOC);
  fd = UniqueFd(bpf_map_create(BPF_MAP_TYPE_HASH, "cordon_names", sizeof(uint32_t), sizeof(cordon_grant_name),
                               kGrantNamesMax + 1, &opts));  // + the salt
  if (!fd.valid()) return SysError("create the name table");
  if (bpf_obj_pin(fd.get(), path.c_str())) return SysError("pin " + path);
  return fd;
}

// The table's key (never a name's id) whose value holds the random key of
// its ids: a name's id is not something the workload can compute, so it
// cannot choose a name whose id lands on one a pending record names after
// that name was removed (PruneNames), making the record name another host.
constexpr uint32_t kSaltId = 0xffffffffu;

// The table's salt, made (getrandom) on first use. 0 if unreadable.
uint64_t Salt(int table) {
  cordon_grant_name entry = {};
  uint64_t salt = 0;
  if (bpf_map_lookup_elem(table, &kSaltId, &entry) == 0) {
    std::memcpy(&salt, entry.name, sizeof salt);
    return salt;
  }
  if (::getrandom(&salt, sizeof salt, 0) != static_cast<ssize_t>(sizeof salt)) return 0;
  std::memcpy(entry.name, &salt, sizeof salt);
  if (bpf_map_update_elem(table, &kSaltId, &entry, BPF_NOEXIST) == 0) return salt;
  if (bpf_map_lookup_elem(table, &kSaltId, &entry) == 0) std::memcpy(&salt, entry.name, sizeof salt);  // raced
  return salt;
}

// The name's id in the table, added if new: its FNV-1a hash keyed by the
// table's salt, the next free one on a collision (never 0: "no name", nor
// kSaltId). *full: the table had no room.
Result<uint32_t> NameId(int table, const std::string& name, bool* full) {
  *full = false;
  const uint64_t salt = Salt(table);
  uint32_t id = 2166136261u;
  for (size_t i = 0; i < sizeof salt; ++i) id = (id ^ static_cast<uint8_t>(salt >> (8 * i))) * 16777619u;
  for (unsigned char c : name) id = (id ^ c) * 16777619u;
  for (uint32_t probe = 0; probe < kGrantNamesMax; ++probe, ++id) {
    if (id == 0 || id == kSaltId) continue;
    cordon_grant_name entry = {};
    if (bpf_map_lookup_elem(table, &id, &entry) == 0) {
      if (std::strncmp(entry.name, name.c_str(), sizeof entry.name) == 0) return id;
      continue;
    }
    std::memcpy(entry.name, name.data(), name.size());
    if (bpf_map_update_elem(table, &id, &entry, BPF_NOEXIST) == 0) return id;
    if (errno == EEXIST) continue;  // taken meanwhile
    if (errno != E2BIG) return SysError("grant: write the name table");
    break;
  }
  *full = true;
  return Error{"grant: the name table is full (" + std::to_string(kGrantNamesMax) +
               " names, each named by a live grant)"};
}

// Removes the names that no grant slot names any more (a renewed slot takes
// its rule's latest answer's name; an expired address leaves its names
// behind), so that answers for ever new names (a wildcard rule over a zone
// with wildcard records) cannot fill the table for good. Under the lock, with
// expired slots removed first. A record read after its name was removed shows
// no net.host (records are read as they come; a removal follows a table of
// kGrantNamesMax names); with the salt, another name taking its id is chance.
size_t PruneNames(int table, int grants) {
  std::vector<uint32_t> used;
  for (const auto& k : MapKeys<cordon_grant_key>(grants, 4 * CORDON_GRANTS_MAX)) {
    cordon_grant_value value = {};
    if (bpf_map_lookup_elem(grants, &k, &value)) continue;
    for (const auto& slot : value.slots)
      if (slot.expires_boot_ns) used.push_back(slot.name_id);
  }
  std::sort(used.begin(), used.end());
  const std::vector<uint32_t> ids = MapKeys<uint32_t>(table, 4 * kGrantNamesMax);
  size_t removed = 0;
  for (uint32_t id : ids)
    if (id != kSaltId && !std::binary_search(used.begin(), used.end(), id) && bpf_map_delete_elem(table, &id) == 0)
      ++removed;
  return removed;
}

// A prune that removed nothing (a table full of names live grants name) is
// not tried again for a second for that sandbox: each costs a walk of both
// maps under the pin root's lock, which every sandbox's grants share.
std::mutex prune_mu;
std::vector<std::pair<uint64_t, uint64_t>> fruitless;  // sandbox id, boot ns of its last fruitless prune

bool PruneDue(uint64_t sandbox_id, uint64_t now) {
  std::lock_guard<std::mutex> lock(prune_mu);
  for (const auto& [id, at] : fruitless)
    if (id == sandbox_id) return now - at >= 1'000'000'000ull;
  return true;
}

void PruneDone(uint64_t sandbox_id, uint64_t now, size_t removed) {
  std::lock_guard<std::mutex> lock(prune_mu);
  std::erase_if(fruitless, [&](const auto& f) { return f.first == sandbox_id || now - f.second >= 1'000'000'000ull; });
  if (!removed) fruitless.emplace_back(sandbox_id, now);
}

struct Locked {
  UniqueFd lock;
  std::string dir;
};

Result<Locked> LockSandbox(uint64_t sandbox_id) {
  auto root = SandboxPinRoot();
  if (!root) return root.error();
  auto lock = LockPinRoot(*root);
  if (!lock) return lock.error();
  Locked out{std::move(*lock), SandboxPinDir(*root, sandbox_id)};
  if (::access(out.dir.c_str(), F_OK) != 0)
    return Error{"no sandbox is attached to cgroup id " + std::to_string(sandbox_id)};
  return out;
}

Result<UniqueFd> OpenPinned(const std::string& dir, const char* pin, uint64_t sandbox_id) {
  UniqueFd fd(bpf_obj_get((dir + "/" + pin).c_str()));
  if (fd.valid()) return fd;
  if (errno == ENOENT)
    return Error{"sandbox " + std::to_string(sandbox_id) + " was attached by a cordon without " + pin +
                 "; replace its policy once (cordon update) to add it"};
  return SysError("open " + dir + "/" + pin);
}

// Removes the expired slots of every address (deleting addresses left with
// none); how many slots were removed.
size_t Expire(int grants, uint64_t now) {
  size_t removed = 0;
  for (const auto& k : MapKeys<cordon_grant_key>(grants, 4 * CORDON_GRANTS_MAX)) {
    cordon_grant_value value = {};
    if (bpf_map_lookup_elem(grants, &k, &value)) continue;
    size_t live = 0, gone = 0;
    for (auto& slot : value.slots) {
      if (!slot.expires_boot_ns) continue;
      if (slot.expires_boot_ns <= now) {
        slot = {};
        gone++;
      } else {
        live++;
      }
    }
    if (!gone) continue;
    if (live ? bpf_map_update_elem(grants, &k, &value, BPF_EXIST) == 0 : bpf_map_delete_elem(grants, &k) == 0)
      removed += gone;
  }
  return removed;
}

}  // namespace

Status GrantAddress(uint64_t sandbox_id, const NameGrant& grant) {
  auto key = KeyOf(grant.family, grant.address);
  if (!key) return key.error();
  if (grant.rule_index == 0) return Error{"grant: rule_index is 1-based (0 names no rule)"};
  if (!grant.tcp && !grant.udp) return Error{"grant: neither tcp nor udp: it would allow nothing"};
  if (grant.ports.size() > CORDON_GRANT_PORT_RANGES)
    return Error{"grant: " + std::to_string(grant.ports.size()) + " port ranges (at most " +
                 std::to_string(CORDON_GRANT_PORT_RANGES) + " per rule)"};
  for (const auto& range : grant.ports)
    if (range.lo > range.hi)
      return Error{"grant: port range " + std::to_string(range.lo) + "-" + std::to_string(range.hi) + " is empty"};
  CORDON_TRY(CheckName(grant.name));
  auto locked = LockSandbox(sandbox_id);
  if (!locked) return locked.error();
  if (!grant.policy_digest.empty()) {
    // Under the lock: a replacement cannot slip in between this and the write.
    auto info = GetSandbox(sandbox_id);
    if (!info) return info.error();
    if (info->policy_digest != grant.policy_digest)
      return Error{"grant: the policy in force (" + (info->policy_digest.empty() ? "unknown" : info->policy_digest) +
                   ") is not the one the answer was judged by (" + grant.policy_digest +
                   "): replaced since the resolver started"};
  }
  auto grants = OpenPinned(locked->dir, "grants", sandbox_id);
  if (!grants) return grants.error();
  auto table = NameTable(locked->dir, true);
  if (!table) return table.error();
  const uint64_t now = BootNs();
  bool full = false;
  auto name_id = NameId(table->get(), grant.name, &full);
  if (!name_id && full && PruneDue(sandbox_id, now)) {
    Expire(grants->get(), now);
    const size_t removed = PruneNames(table->get(), grants->get());
    PruneDone(sandbox_id, now, removed);
    if (removed) name_id = NameId(table->get(), grant.name, &full);
  }
  if (!name_id) return name_id.error();

  cordon_grant_slot slot = {};
  const uint64_t seconds = uint64_t{std::max(grant.ttl_seconds, kGrantTtlFloorSeconds)} + grant.grace_seconds;
  slot.expires_boot_ns = now + seconds * 1'000'000'000ull;
  slot.rule = grant.rule_index;
  slot.name_id = *name_id;
  slot.protocols = static_cast<uint8_t>((grant.tcp ? CORDON_GRANT_TCP : 0) | (grant.udp ? CORDON_GRANT_UDP : 0));
  slot.nranges = static_cast<uint8_t>(grant.ports.size());
  for (size_t i = 0; i < grant.ports.size(); ++i) slot.ranges[i] = {grant.ports[i].lo, grant.ports[i].hi};

  // The address's slots as they are: this rule's is renewed (never
  // shortened: two answers of one rule), else an empty or expired one is taken.
  cordon_grant_value value = {};
  const bool existed = bpf_map_lookup_elem(grants->get(), &*key, &value) == 0;
  cordon_grant_slot* target = nullptr;
  for (auto& s : value.slots)
    if (s.expires_boot_ns && s.rule == slot.rule) target = &s;
  if (target) {
    slot.expires_boot_ns = std::max(slot.expires_boot_ns, target->expires_boot_ns);
  } else {
    for (auto& s : value.slots)
      if (!target && s.expires_boot_ns <= now) target = &s;
  }
  if (!target)
    return Error{"grant: " + AddressText(key->addr) + " is already granted for " + std::to_string(CORDON_GRANT_SLOTS) +
                 " rules"};
  *target = slot;
  // A hash map element is replaced whole: a program reads the old value or
  // the new one, never a mix.
  if (bpf_map_update_elem(grants->get(), &*key, &value, existed ? BPF_ANY : BPF_NOEXIST) == 0) return {};
  if (errno != E2BIG) return SysError("grant: write " + locked->dir + "/grants");
  Expire(grants->get(), now);
  if (bpf_map_update_elem(grants->get(), &*key, &value, BPF_ANY) == 0) return {};
  if (errno == E2BIG)
    return Error{"grant: sandbox " + std::to_string(sandbox_id) + " holds " + std::to_string(CORDON_GRANTS_MAX) +
                 " granted addresses already (none expired): " + AddressText(key->addr) + " not granted"};
  return SysError("grant: write " + locked->dir + "/grants");
}

Result<size_t> ExpireGrants(uint64_t sandbox_id, uint64_t now_boot_ns) {
  auto locked = LockSandbox(sandbox_id);
  if (!locked) return locked.error();
  auto grants = OpenPinned(locked->dir, "grants", sandbox_id);
  if (!grants) return grants.error();
  return Expire(grants->get(), now_boot_ns);
}

Result<std::vector<GrantEntry>> ListGrants(uint64_t sandbox_id) {
  auto root = SandboxPinRoot();
  if (!root) return root.error();
  const std::string dir = SandboxPinDir(*root, sandbox_id);
  auto grants = OpenPinned(dir, "grants", sandbox_id);
  if (!grants) return grants.error();
  auto table = NameTable(dir, false);  // absent until a first grant
  std::vector<GrantEntry> out;
  cordon_grant_key key = {}, next = {};
  const void* prev = nullptr;
  size_t seen = 0;
  while (seen++ < 4 * CORDON_GRANTS_MAX && bpf_map_get_next_key(grants->get(), prev, &next) == 0) {
    key = next;
    prev = &key;
    cordon_grant_value value = {};
    if (bpf_map_lookup_elem(grants->get(), &key, &value)) continue;
    for (const auto& slot : value.slots) {
      if (!slot.expires_boot_ns) continue;
      GrantEntry e;
      std::memcpy(e.address.data(), key.addr, 16);
      e.address_text = AddressText(key.addr);
      e.rule_index = slot.rule;
      e.name_id = slot.name_id;
      e.expires_boot_ns = slot.expires_boot_ns;
      e.tcp = slot.protocols & CORDON_GRANT_TCP;
      e.udp = slot.protocols & CORDON_GRANT_UDP;
      for (size_t i = 0; i < std::min<size_t>(slot.nranges, CORDON_GRANT_PORT_RANGES); ++i)
        e.ports.push_back({slot.ranges[i].first, slot.ranges[i].last});
      cordon_grant_name name = {};
      if (table && bpf_map_lookup_elem(table->get(), &e.name_id, &name) == 0)
        e.name.assign(name.name, ::strnlen(name.name, sizeof name.name));
      out.push_back(std::move(e));
    }
  }
  std::sort(out.begin(), out.end(), [](const GrantEntry& a, const GrantEntry& b) {
    return std::tie(a.name, a.address, a.rule_index) < std::tie(b.name, b.address, b.rule_index);
  });
  return out;
}

Result<std::string> GrantName(uint64_t sandbox_id, uint32_t name_id) {
  auto root = SandboxPinRoot();
  if (!root) return root.error();
  auto table = NameTable(SandboxPinDir(*root, sandbox_id), false);
  if (!table) return std::string();
  cordon_grant_name name = {};
  if (bpf_map_lookup_elem(table->get(), &name_id, &name)) return std::string();
  return std::string(name.name, ::strnlen(name.name, sizeof name.name));
}

Status SetResolver(uint64_t sandbox_id, const std::optional<ResolverAddress>& v4,
                   const std::optional<ResolverAddress>& v6, uint32_t mark) {
  cordon_resolver r = {};
  r.mark = mark;
  if (v4) {
    if (!v4->port) return Error{"resolver: IPv4 port 0"};
    r.flags |= CORDON_RESOLVER_F_V4;
    std::memcpy(&r.ip4, v4->ip.data(), 4);
    r.port4 = htons(v4->port);
  }
  if (v6) {
    if (!v6->port) return Error{"resolver: IPv6 port 0"};
    r.flags |= CORDON_RESOLVER_F_V6;
    std::memcpy(r.ip6, v6->ip.data(), 16);
    r.port6 = htons(v6->port);
  }
  auto locked = LockSandbox(sandbox_id);
  if (!locked) return locked.error();
  auto map = OpenPinned(locked->dir, CORDON_RESOLVER_PIN, sandbox_id);
  if (!map) return map.error();
  uint32_t zero = 0;
  // An array element is copied in place: a program racing with a change may
  // read half of each (one query sent to a mix of the old and new resolver).
  // The resolver is set before the workload starts, and changed only with it.
  if (bpf_map_update_elem(map->get(), &zero, &r, BPF_ANY)) return SysError("resolver: write " + locked->dir);
  return {};
}

}  // namespace cordon
