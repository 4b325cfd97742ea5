// B4/B5 helper for bench/agent_bench.py: libc only, compiled by bench/run_agent.sh.
//
//   flood CGROUP_DIR RATE SECONDS
//       Moves itself into CGROUP_DIR (cgroup.procs), then sends 16-byte UDP
//       datagrams to 127.0.0.1:9 (which the sandbox's policy denies) for
//       SECONDS: as fast as it can with RATE 0, else paced to RATE per second
//       (checked every 64 sends; it never runs ahead of RATE * elapsed). Prints
//       one JSON line: sends, how many were refused with EPERM, other results,
//       and the elapsed CLOCK_MONOTONIC time.
//   count FILE
//       Copies stdin to FILE until EOF (what a `cordon tail` subscriber
//       printed; the driver counts its lines).
//   pagecache FILE BYTES
//       Appends BYTES bytes to a new FILE the way the agent's jsonl sink does
//       (write() of up to 1 MiB from one reused buffer, no sync) and prints
//       its own user and system CPU time (getrusage) and wall time. The
//       driver runs it after each B4 run with that run's audit-file growth:
//       what the same bytes cost to put into fresh page cache on this machine,
//       side by side with the agent.
//   time CMD ARGS...
//       Runs CMD (stdout and stderr to /dev/null) and prints its wall time in
//       ns (CLOCK_MONOTONIC, fork to waitpid) and its exit status.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int join_cgroup(const char* dir) {
  char path[4096], pid[32];
  snprintf(path, sizeof path, "%s/cgroup.procs", dir);
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
  int ok = write(fd, pid, (size_t)n) == n;
  close(fd);
  return ok ? 0 : -1;
}

static int flood(const char* cgroup, double rate, double seconds) {
  if (join_cgroup(cgroup) != 0) {
    fprintf(stderr, "agent_bench_helper: join %s: %s\n", cgroup, strerror(errno));
    return 1;
  }
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    fprintf(stderr, "agent_bench_helper: socket: %s\n", strerror(errno));
    return 1;
  }
  struct sockaddr_in dst;
  memset(&dst, 0, sizeof dst);
  dst.sin_family = AF_INET;
  dst.sin_port = htons(9);
  inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
  char payload[16] = "cordon-bench";
  uint64_t sends = 0, eperm = 0, other = 0;
  const int64_t t0 = now_ns();
  const int64_t end = t0 + (int64_t)(seconds * 1e9);
  int64_t now = t0;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      ssize_t r = sendto(fd, payload, sizeof payload, 0, (struct sockaddr*)&dst, sizeof dst);
      sends++;
      if (r < 0 && errno == EPERM) eperm++;
      else other++;
    }
    now = now_ns();
    if (now >= end) break;
    if (rate > 0) {
      // Not ahead of the schedule: wait (spinning, so short waits are exact).
      for (;;) {
        double due = (double)(now - t0) * rate / 1e9;
        if ((double)sends <= due || now >= end) break;
        now = now_ns();
      }
      if (now >= end) break;
    }
  }
  printf("{\"sends\":%llu,\"eperm\":%llu,\"other\":%llu,\"ns\":%lld}\n", (unsigned long long)sends,
         (unsigned long long)eperm, (unsigned long long)other, (long long)(now - t0));
  return 0;
}

static int count(const char* file) {
  int out = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (out < 0) return 1;
  static char buf[1 << 16];
  uint64_t lines = 0;
  for (;;) {
    ssize_t n = read(0, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) lines += buf[i] == '\n';
    for (ssize_t off = 0; off < n;) {
      ssize_t w = write(out, buf + off, (size_t)(n - off));
      if (w < 0) {
        if (errno == EINTR) continue;
        return 1;
      }
      off += w;
    }
  }
  close(out);
  printf("%llu\n", (unsigned long long)lines);
  return 0;
}

static int pagecache(const char* file, double bytes) {
  int fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    fprintf(stderr, "agent_bench_helper: create %s: %s\n", file, strerror(errno));
    return 1;
  }
  static char buf[1 << 20];
  memset(buf, 'x', sizeof buf);
  struct rusage r0, r1;
  getrusage(RUSAGE_SELF, &r0);
  const int64_t t0 = now_ns();
  uint64_t left = (uint64_t)bytes;
  while (left > 0) {
    size_t n = left < sizeof buf ? (size_t)left : sizeof buf;
    ssize_t w = write(fd, buf, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      fprintf(stderr, "agent_bench_helper: write %s: %s\n", file, strerror(errno));
      return 1;
    }
    left -= (uint64_t)w;
  }
  const int64_t t1 = now_ns();
  getrusage(RUSAGE_SELF, &r1);
  close(fd);
  double user = (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) + (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) / 1e6;
  double sys = (double)(r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) + (double)(r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1e6;
  printf("{\"bytes\":%.0f,\"user_s\":%.6f,\"sys_s\":%.6f,\"ns\":%lld}\n", bytes, user, sys, (long long)(t1 - t0));
  return 0;
}

static int time_command(char** argv) {
  const int64_t t0 = now_ns();
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    dup2(null, 1);
    dup2(null, 2);
    execvp(argv[0], argv);
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const int64_t t1 = now_ns();
  printf("{\"ns\":%lld,\"status\":%d}\n", (long long)(t1 - t0), WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], "time") == 0) return time_command(argv + 2);
  if (argc == 5 && strcmp(argv[1], "flood") == 0) return flood(argv[2], atof(argv[3]), atof(argv[4]));
  if (argc == 3 && strcmp(argv[1], "count") == 0) return count(argv[2]);
  if (argc == 4 && strcmp(argv[1], "pagecache") == 0) return pagecache(argv[2], atof(argv[3]));
  fprintf(stderr,
          "usage: agent_bench_helper flood CGROUP_DIR RATE SECONDS | count FILE | pagecache FILE BYTES | time CMD ARGS...\n");
  return 2;
}
