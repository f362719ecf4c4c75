// The sandbox a server runs in, set up by the reaper's image between the
// reaper and the server (see docs/sandbox.md). The runtime computes the
// policy (core/sandbox_policy) and passes it as arguments; this program
// only carries it out, and refuses to run the server when any requested
// protection cannot be put in place: what the runtime reports as in force
// must be.
//
//   mcprt-sandbox sandbox [options] -- PATH ARGV0 ARGS...
//     --userns      a user namespace of its own (the caller's ids mapped to
//                   themselves), with --mountns/--netns/--pidns and an IPC
//                   namespace of its own
//     --hide P      an empty read-only directory (or /dev/null) over P
//     --write P     Landlock: P may be written (all else read-only)
//     --landlock N  the Landlock ABI to use (0: none)
//     --seccomp     the system-call filter
//     --nproc N     at most N processes (needs --userns: per namespace)
//     --tmp DIR     a private directory under DIR, as TMPDIR, removed after
//     --forward N   listen on 127.0.0.1:N inside the network namespace and
//                   hand each connection to the runtime's egress proxy over
//                   fd 3 (SCM_RIGHTS)
//
// Three processes: this one (the reaper's child, outside the PID namespace:
// it forwards connections and removes the private directory), its child
// (PID 1 of the namespace: it reaps orphans and exits with the server's
// status) and the server.
//
//   mcprt-sandbox sandbox-probe
//     prints what this machine allows, one line: "userns=1 mountns=1 ..."
#include "io/reaper_image/sandbox.hpp"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <initializer_list>
#include <linux/capability.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace mcprt::sandbox_image {

namespace {

// Landlock's ABI, spelled out: the system's headers predate ABI 4.
constexpr uint64_t ll_execute = 1ULL << 0;
constexpr uint64_t ll_write_file = 1ULL << 1;
constexpr uint64_t ll_read_file = 1ULL << 2;
constexpr uint64_t ll_read_dir = 1ULL << 3;
constexpr uint64_t ll_remove_dir = 1ULL << 4;
constexpr uint64_t ll_remove_file = 1ULL << 5;
constexpr uint64_t ll_make_char = 1ULL << 6;
constexpr uint64_t ll_make_dir = 1ULL << 7;
constexpr uint64_t ll_make_reg = 1ULL << 8;
constexpr uint64_t ll_make_sock = 1ULL << 9;
constexpr uint64_t ll_make_fifo = 1ULL << 10;
constexpr uint64_t ll_make_block = 1ULL << 11;
constexpr uint64_t ll_make_sym = 1ULL << 12;
constexpr uint64_t ll_refer = 1ULL << 13;    // ABI 2
constexpr uint64_t ll_truncate = 1ULL << 14; // ABI 3
constexpr uint64_t ll_net_bind_tcp = 1ULL << 0;    // ABI 4
constexpr uint64_t ll_net_connect_tcp = 1ULL << 1; // ABI 4
constexpr uint64_t ll_scope_abstract_unix = 1ULL << 0; // ABI 6
constexpr uint64_t ll_scope_signal = 1ULL << 1;        // ABI 6
constexpr uint32_t ll_rule_path_beneath = 1;
constexpr uint32_t ll_rule_net_port = 2;
constexpr uint32_t ll_create_version = 1U << 0;

struct ll_ruleset_attr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};
struct __attribute__((packed)) ll_path_beneath {
  uint64_t allowed_access;
  int32_t parent_fd;
};
struct ll_net_port {
  uint64_t allowed_access;
  uint64_t port;
};

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

constexpr int max_paths = 256;
constexpr int control_fd = 3;

struct options {
  bool userns = false, mountns = false, netns = false, pidns = false, seccomp = false;
  int landlock = 0;
  long nproc = 0;
  long long memory = 0; // bytes; 0: no cap
  bool cgroup_pids = false;
  const char* tmp_parent = nullptr;
  int forward_port = 0;
  const char* hide[max_paths];
  int hide_count = 0;
  const char* write[max_paths];
  int write_count = 0;
  const char* path = nullptr; // what to execute
  char** argv = nullptr;      // the server's argv
};

char tmp_dir[4096];
// The cgroups made for this sandbox ("" for none), removed at the end.
struct cgroup_dirs {
  char pids[4096];
  char memory[4096];
};
cgroup_dirs groups;

[[noreturn]] void die(const char* what, int err) {
  // The server's stderr: the runtime keeps its last lines for the error.
  dprintf(2, "mcprt sandbox: %s: %s\n", what, strerror(err));
  if (tmp_dir[0]) {
    umount2(tmp_dir, MNT_DETACH);
    rmdir(tmp_dir);
  }
  for (const char* dir : {groups.pids, groups.memory})
    if (dir[0]) rmdir(dir);
  _exit(126);
}

bool write_file(const char* path, const char* text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  size_t n = strlen(text);
  bool ok = write(fd, text, n) == static_cast<ssize_t>(n);
  close(fd);
  return ok;
}

bool map_ids(uid_t uid, gid_t gid) {
  char line[64];
  if (!write_file("/proc/self/setgroups", "deny") && errno != ENOENT) return false;
  snprintf(line, sizeof line, "%u %u 1", static_cast<unsigned>(uid), static_cast<unsigned>(uid));
  if (!write_file("/proc/self/uid_map", line)) return false;
  snprintf(line, sizeof line, "%u %u 1", static_cast<unsigned>(gid), static_cast<unsigned>(gid));
  return write_file("/proc/self/gid_map", line);
}

bool loopback_up() {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  bool ok = ioctl(s, SIOCGIFFLAGS, &ifr) == 0;
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  ok = ok && ioctl(s, SIOCSIFFLAGS, &ifr) == 0;
  close(s);
  return ok;
}

// An empty, read-only directory over a directory, /dev/null over anything
// else. A path that does not exist has nothing to hide.
void hide(const char* path) {
  struct stat st;
  if (stat(path, &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return;
    // Unreadable to the owner already (another user's home): nothing
    // readable to hide, but say so rather than guess.
    if (errno == EACCES) return;
    die(path, errno);
  }
  if (S_ISDIR(st.st_mode)) {
    if (mount("mcprt-hidden", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k,mode=0555") != 0)
      die(path, errno);
    return;
  }
  if (mount("/dev/null", path, nullptr, MS_BIND, nullptr) != 0) die(path, errno);
  if (mount(nullptr, path, nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    die(path, errno);
}

uint64_t landlock_fs_rights(int abi) {
  uint64_t r = ll_write_file | ll_remove_dir | ll_remove_file | ll_make_char | ll_make_dir | ll_make_reg
             | ll_make_sock | ll_make_fifo | ll_make_block | ll_make_sym;
  if (abi >= 2) r |= ll_refer;
  if (abi >= 3) r |= ll_truncate;
  return r;
}

void apply_landlock(const options& o) {
  ll_ruleset_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.handled_access_fs = landlock_fs_rights(o.landlock);
  size_t size = 8;
  // Without a network namespace of its own, Landlock is what keeps TCP in:
  // no connect and no bind, except to the forwarder.
  if (o.landlock >= 4 && !o.netns) {
    attr.handled_access_net = ll_net_bind_tcp | ll_net_connect_tcp;
    size = 16;
  }
  if (o.landlock >= 6) {
    attr.scoped = ll_scope_abstract_unix | ll_scope_signal;
    size = 24;
  }
  int rs = static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, size, 0));
  if (rs < 0) die("landlock_create_ruleset", errno);
  for (int i = 0; i < o.write_count; ++i) {
    int fd = open(o.write[i], O_PATH | O_CLOEXEC);
    if (fd < 0) continue; // not there (yet): nothing to allow
    struct stat st;
    ll_path_beneath rule;
    rule.parent_fd = fd;
    rule.allowed_access = attr.handled_access_fs;
    // A file takes only the rights that apply to files.
    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) rule.allowed_access &= ll_write_file | ll_truncate;
    if (syscall(SYS_landlock_add_rule, rs, ll_rule_path_beneath, &rule, 0) != 0) die(o.write[i], errno);
    close(fd);
  }
  if (attr.handled_access_net && o.forward_port) {
    ll_net_port port{ll_net_connect_tcp, static_cast<uint64_t>(o.forward_port)};
    if (syscall(SYS_landlock_add_rule, rs, ll_rule_net_port, &port, 0) != 0) die("landlock port rule", errno);
  }
  if (syscall(SYS_landlock_restrict_self, rs, 0) != 0) die("landlock_restrict_self", errno);
  close(rs);
}

void apply_seccomp() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) die("seccomp_init", ENOMEM);
  auto deny = [&](int nr, int err) {
    if (nr < 0) return; // not on this architecture
    int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(err), nr, 0);
    if (r != 0 && r != -EEXIST) die("seccomp_rule_add", -r);
  };
  const int refused[] = {
    SCMP_SYS(ptrace), SCMP_SYS(process_vm_readv), SCMP_SYS(process_vm_writev), SCMP_SYS(kcmp),
    SCMP_SYS(mount), SCMP_SYS(umount2), SCMP_SYS(pivot_root), SCMP_SYS(chroot), SCMP_SYS(move_mount),
    SCMP_SYS(open_tree), SCMP_SYS(fsopen), SCMP_SYS(fsconfig), SCMP_SYS(fsmount), SCMP_SYS(fspick),
    SCMP_SYS(mount_setattr), SCMP_SYS(unshare), SCMP_SYS(setns), SCMP_SYS(bpf), SCMP_SYS(kexec_load),
    SCMP_SYS(kexec_file_load), SCMP_SYS(keyctl), SCMP_SYS(add_key), SCMP_SYS(request_key),
    SCMP_SYS(perf_event_open), SCMP_SYS(userfaultfd), SCMP_SYS(init_module), SCMP_SYS(finit_module),
    SCMP_SYS(delete_module), SCMP_SYS(reboot), SCMP_SYS(swapon), SCMP_SYS(swapoff), SCMP_SYS(acct),
    SCMP_SYS(quotactl), SCMP_SYS(syslog), SCMP_SYS(settimeofday), SCMP_SYS(clock_settime),
    SCMP_SYS(clock_adjtime), SCMP_SYS(adjtimex), SCMP_SYS(iopl), SCMP_SYS(ioperm),
    SCMP_SYS(open_by_handle_at), SCMP_SYS(name_to_handle_at), SCMP_SYS(lookup_dcookie), SCMP_SYS(vhangup),
    SCMP_SYS(personality), SCMP_SYS(pidfd_getfd),
  };
  for (int nr : refused)
    deny(nr, EPERM);
  // Not available rather than refused: callers fall back (libuv to plain
  // reads, glibc from clone3 to clone, whose flags the filter can see).
  deny(SCMP_SYS(io_uring_setup), ENOSYS);
  deny(SCMP_SYS(clone3), ENOSYS);
  const uint64_t new_namespaces = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC
                                | CLONE_NEWUTS | CLONE_NEWCGROUP;
  for (uint64_t bit = 1; bit; bit <<= 1) {
    if (!(new_namespaces & bit)) continue;
    int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, bit, bit));
    if (r != 0) die("seccomp_rule_add clone", -r);
  }
  int r = seccomp_load(ctx);
  if (r != 0) die("seccomp_load", -r);
  seccomp_release(ctx);
}

void drop_capabilities() {
  for (int cap = 0; cap <= 63; ++cap)
    prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2];
  memset(data, 0, sizeof data);
  syscall(SYS_capset, &header, data);
}

void default_signals() {
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

int remove_entry(const char* path, const struct stat*, int type, struct FTW*) {
  if (type == FTW_DP) rmdir(path);
  else unlink(path);
  return 0;
}

void remove_tmp() {
  if (!tmp_dir[0]) return;
  if (umount2(tmp_dir, MNT_DETACH) == 0 && rmdir(tmp_dir) == 0) return;
  nftw(tmp_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

// What a sandbox killed with SIGKILL left: its private directory, empty
// (the tmpfs on it died with the namespace). Only ours, only empty, only
// when the process that made it is gone.
void sweep_stale_tmp(const char* parent) {
  DIR* d = opendir(parent);
  if (!d) return;
  int swept = 0;
  while (dirent* e = readdir(d)) {
    int pid = 0;
    char rest[16];
    if (sscanf(e->d_name, "mcprt-sandbox-%d-%15s", &pid, rest) != 2 || pid <= 0) continue;
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", parent, e->d_name);
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) continue;
    rmdir(path); // fails, harmlessly, unless empty
    if (++swept == 64) break;
  }
  closedir(d);
}

int status_code(int wstatus) {
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
  return 1;
}

// The server's environment with TMPDIR pointed at the private directory.
char** with_tmpdir(char** envp) {
  size_t n = 0;
  while (envp && envp[n])
    ++n;
  auto** out = static_cast<char**>(calloc(n + 2, sizeof(char*)));
  if (!out) die("environment", ENOMEM);
  size_t k = 0;
  for (size_t i = 0; i < n; ++i)
    if (strncmp(envp[i], "TMPDIR=", 7) != 0) out[k++] = envp[i];
  static char tmpdir_var[4096 + 8];
  snprintf(tmpdir_var, sizeof tmpdir_var, "TMPDIR=%s", tmp_dir);
  out[k++] = tmpdir_var;
  out[k] = nullptr;
  return out;
}

// -- cgroups: the process cap for root (RLIMIT_NPROC never applies to it)
// and the memory cap, where this user may make a cgroup of its own --------

// The directory of this process's cgroup for `controller`: a cgroup v1
// hierarchy of its own (/sys/fs/cgroup/<controller>), else the unified one.
bool own_cgroup(const char* controller, char* out, size_t size) {
  FILE* f = fopen("/proc/self/cgroup", "re");
  if (!f) return false;
  char line[4096];
  bool found = false;
  char unified[4096] = "";
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    char* first = strchr(line, ':');
    if (!first) continue;
    char* second = strchr(first + 1, ':');
    if (!second) continue;
    *second = '\0';
    const char* list = first + 1;
    const char* path = second + 1;
    if (!*list) {
      snprintf(unified, sizeof unified, "%s", path);
      continue;
    }
    // "4:memory:/x", "2:cpu,cpuacct:/y"
    size_t n = strlen(controller);
    for (const char* c = list; *c;) {
      const char* end = strchr(c, ',');
      size_t len = end ? static_cast<size_t>(end - c) : strlen(c);
      if (len == n && !strncmp(c, controller, n)) {
        snprintf(out, size, "/sys/fs/cgroup/%s%s", controller, path);
        found = true;
      }
      if (!end) break;
      c = end + 1;
    }
  }
  fclose(f);
  if (found) return true;
  // cgroup v2: the controller must be enabled for the children of ours.
  char controllers[4096];
  snprintf(controllers, sizeof controllers, "/sys/fs/cgroup%s/cgroup.subtree_control", unified);
  FILE* c = fopen(controllers, "re");
  if (!c) return false;
  char enabled[1024] = "";
  bool ok = fgets(enabled, sizeof enabled, c) && strstr(enabled, controller);
  fclose(c);
  if (ok) snprintf(out, size, "/sys/fs/cgroup%s", unified);
  return ok;
}

// A child cgroup of ours for `controller` with `file` set to `value`;
// false (and nothing left behind) when this user may not make one.
bool make_cgroup(const char* controller, const char* file, const char* value, char* dir, size_t size) {
  char parent[4096];
  if (!own_cgroup(controller, parent, sizeof parent)) return false;
  snprintf(dir, size, "%s/mcprt-sandbox-%d", parent, static_cast<int>(getpid()));
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
    dir[0] = '\0';
    return false;
  }
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  if (!write_file(path, value)) {
    rmdir(dir);
    dir[0] = '\0';
    return false;
  }
  return true;
}

bool join_cgroup(const char* dir, pid_t pid) {
  char path[4200], text[32];
  snprintf(path, sizeof path, "%s/cgroup.procs", dir);
  snprintf(text, sizeof text, "%d", static_cast<int>(pid));
  return write_file(path, text);
}

void remove_cgroups() {
  for (char* dir : {groups.pids, groups.memory}) {
    if (!dir[0]) continue;
    // The namespace's last processes may take a moment to leave.
    for (int i = 0; i < 200 && rmdir(dir) != 0 && errno == EBUSY; ++i)
      usleep(1000);
    dir[0] = '\0';
  }
}

[[noreturn]] void run_pid1(const options& o, char** envp, int listen_fd, int gate) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // Nothing runs before the outer process has put us in our cgroups.
  char go = 0;
  while (read(gate, &go, 1) < 0 && errno == EINTR) {
  }
  close(gate);
  if (go != 'g') _exit(126);
  if (listen_fd >= 0) close(listen_fd);
  if (o.forward_port) close(control_fd);
  if (o.pidns && o.mountns && mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    die("mount /proc", errno);
  if (o.nproc > 0) {
    rlimit lim{static_cast<rlim_t>(o.nproc), static_cast<rlim_t>(o.nproc)};
    if (setrlimit(RLIMIT_NPROC, &lim) != 0) die("setrlimit", errno);
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die("no_new_privs", errno);
  if (o.landlock > 0) apply_landlock(o);
  if (o.seccomp) apply_seccomp();
  pid_t server = fork();
  if (server < 0) die("fork", errno);
  if (server == 0) {
    default_signals();
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    drop_capabilities();
    execve(o.path, o.argv, envp);
    int e = errno;
    dprintf(2, "mcprt sandbox: cannot run '%s': %s\n", o.argv[0], strerror(e));
    _exit(127);
  }
  // The server's pipes are the server's: with a copy open here, a server
  // that closed its stdout would look alive to the runtime.
  for (int fd = 0; fd <= 2; ++fd)
    close(fd);
  // PID 1: every orphan of the namespace is ours to reap; the server's
  // status is the sandbox's.
  for (;;) {
    int ws = 0;
    pid_t p = wait(&ws);
    if (p == server) _exit(status_code(ws));
    if (p < 0 && errno != EINTR) _exit(1);
  }
}

void forward_one(int listen_fd) {
  int conn = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (conn < 0) return;
  char byte = 'c';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr mh;
  memset(&mh, 0, sizeof mh);
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = control;
  mh.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&mh);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &conn, sizeof conn);
  while (sendmsg(control_fd, &mh, MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
  close(conn);
}

bool parse(int argc, char** argv, options& o) {
  for (int i = 2; i < argc; ++i) {
    const char* a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (!strcmp(a, "--")) {
      if (i + 2 >= argc) return false;
      o.path = argv[i + 1];
      o.argv = argv + i + 2;
      return true;
    }
    if (!strcmp(a, "--userns")) o.userns = true;
    else if (!strcmp(a, "--mountns")) o.mountns = true;
    else if (!strcmp(a, "--netns")) o.netns = true;
    else if (!strcmp(a, "--pidns")) o.pidns = true;
    else if (!strcmp(a, "--seccomp")) o.seccomp = true;
    else if (!strcmp(a, "--landlock")) {
      const char* v = value();
      if (!v) return false;
      o.landlock = atoi(v);
    } else if (!strcmp(a, "--nproc")) {
      const char* v = value();
      if (!v) return false;
      o.nproc = atol(v);
    } else if (!strcmp(a, "--memory")) {
      const char* v = value();
      if (!v) return false;
      o.memory = atoll(v);
    } else if (!strcmp(a, "--cgroup-pids")) {
      o.cgroup_pids = true;
    } else if (!strcmp(a, "--tmp")) {
      if (!(o.tmp_parent = value())) return false;
    } else if (!strcmp(a, "--forward")) {
      const char* v = value();
      if (!v) return false;
      o.forward_port = atoi(v);
    } else if (!strcmp(a, "--hide")) {
      const char* v = value();
      if (!v || o.hide_count == max_paths) return false;
      o.hide[o.hide_count++] = v;
    } else if (!strcmp(a, "--write")) {
      const char* v = value();
      if (!v || o.write_count == max_paths) return false;
      o.write[o.write_count++] = v;
    } else {
      return false;
    }
  }
  return false;
}

} // namespace

int run_sandbox(int argc, char** argv, char** envp) {
  static options o;
  if (!parse(argc, argv, o)) {
    dprintf(2, "mcprt sandbox: bad arguments\n");
    return 126;
  }
  uid_t uid = getuid();
  gid_t gid = getgid();
  if (o.tmp_parent) {
    sweep_stale_tmp(o.tmp_parent);
    snprintf(tmp_dir, sizeof tmp_dir, "%s/mcprt-sandbox-%d-XXXXXX", o.tmp_parent, static_cast<int>(getpid()));
    if (!mkdtemp(tmp_dir)) {
      tmp_dir[0] = '\0';
      die("private temporary directory", errno);
    }
    envp = with_tmpdir(envp);
    if (o.write_count < max_paths) o.write[o.write_count++] = tmp_dir;
  }
  // Before the user namespace: the cgroup files are the host's.
  if (o.cgroup_pids) {
    char value[32];
    snprintf(value, sizeof value, "%ld", o.nproc > 0 ? o.nproc : 128);
    if (!make_cgroup("pids", "pids.max", value, groups.pids, sizeof groups.pids)) die("pids cgroup", errno);
  }
  if (o.memory > 0) {
    char value[32];
    snprintf(value, sizeof value, "%lld", o.memory);
    bool made = make_cgroup("memory", "memory.max", value, groups.memory, sizeof groups.memory)
                || make_cgroup("memory", "memory.limit_in_bytes", value, groups.memory, sizeof groups.memory);
    if (!made) {
      remove_cgroups();
      die("memory cgroup", errno);
    }
  }
  int flags = 0;
  if (o.userns) flags |= CLONE_NEWUSER | CLONE_NEWIPC;
  if (o.mountns) flags |= CLONE_NEWNS;
  if (o.netns) flags |= CLONE_NEWNET;
  if (o.pidns) flags |= CLONE_NEWPID;
  if (flags && unshare(flags) != 0) die("unshare", errno);
  if (o.userns && !map_ids(uid, gid)) die("user namespace id map", errno);
  if (o.mountns) {
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) die("mount propagation", errno);
    for (int i = 0; i < o.hide_count; ++i)
      hide(o.hide[i]);
    // The private directory is a tmpfs of the namespace: what the server
    // leaves there is gone with it, even when this process is SIGKILLed
    // (then only the empty directory remains).
    if (tmp_dir[0] && mount("mcprt-tmp", tmp_dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=1g,mode=0700") != 0)
      die("private temporary directory", errno);
    // The host's /dev/shm is a channel to every other process: a private one.
    struct stat st;
    if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode)) {
      if (mount("mcprt-shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777") != 0)
        die("/dev/shm", errno);
      if (o.write_count < max_paths) o.write[o.write_count++] = "/dev/shm";
    }
  }
  if (o.netns && !loopback_up()) die("loopback", errno);
  int listen_fd = -1;
  if (o.forward_port) {
    listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listen_fd < 0) die("forwarder socket", errno);
    int one = 1;
    setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(o.forward_port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(listen_fd, 64) != 0)
      die("forwarder listen", errno);
  }
  // SIGCHLD waits in a signalfd; the children unblock it for themselves.
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, nullptr);
  int sigfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  int gate[2];
  if (pipe2(gate, O_CLOEXEC) != 0) die("pipe", errno);
  pid_t pid1 = fork();
  if (pid1 < 0) die("fork", errno);
  if (pid1 == 0) {
    if (sigfd >= 0) close(sigfd);
    close(gate[1]);
    run_pid1(o, envp, listen_fd, gate[0]);
  }
  close(gate[0]);
  for (const char* dir : {groups.pids, groups.memory})
    if (dir[0] && !join_cgroup(dir, pid1)) {
      int e = errno;
      kill(pid1, SIGKILL);
      waitpid(pid1, nullptr, 0);
      remove_cgroups();
      die("joining the cgroup", e);
    }
  (void)!write(gate[1], "g", 1);
  close(gate[1]);
  // The reaper signals the whole group: the server takes SIGTERM itself,
  // and this process must outlive it to report its status.
  const int ignored[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2};
  for (int sig : ignored)
    signal(sig, SIG_IGN);
  for (int fd = 0; fd <= 2; ++fd)
    close(fd);
  for (;;) {
    int ws = 0;
    pid_t p = waitpid(pid1, &ws, WNOHANG);
    if (p == pid1) {
      remove_tmp();
      remove_cgroups();
      _exit(status_code(ws));
    }
    pollfd fds[2] = {{sigfd, POLLIN, 0}, {listen_fd, POLLIN, 0}};
    int n = poll(fds, listen_fd >= 0 ? 2 : 1, sigfd >= 0 ? -1 : 100);
    if (n < 0 && errno != EINTR) _exit(1);
    if (sigfd >= 0 && (fds[0].revents & POLLIN)) {
      signalfd_siginfo info[8];
      while (read(sigfd, info, sizeof info) > 0) {
      }
    }
    if (listen_fd >= 0 && (fds[1].revents & POLLIN))
      for (int k = 0; k < 16; ++k)
        forward_one(listen_fd);
  }
}

int run_probe() {
  int landlock = static_cast<int>(syscall(SYS_landlock_create_ruleset, nullptr, 0, ll_create_version));
  if (landlock < 0) landlock = 0;
  bool seccomp = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
  // Each namespace is tried in a child, as a server's sandbox would be.
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return 1;
  pid_t child = fork();
  if (child == 0) {
    char r[5] = {'0', '0', '0', '0', '0'}; // userns mountns netns pidns proc
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWIPC) == 0 && map_ids(uid, gid)) {
      r[0] = '1';
      if (unshare(CLONE_NEWNS) == 0 && mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0
          && mount("mcprt-probe", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k") == 0)
        r[1] = '1';
      if (unshare(CLONE_NEWNET) == 0 && loopback_up()) r[2] = '1';
      if (unshare(CLONE_NEWPID) == 0) {
        r[3] = '1';
        pid_t inner = fork();
        if (inner == 0) {
          _exit(r[1] == '1' && mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) == 0 ? 0 : 1);
        }
        int ws = 0;
        if (inner > 0 && waitpid(inner, &ws, 0) == inner && WIFEXITED(ws) && WEXITSTATUS(ws) == 0) r[4] = '1';
      }
    }
    (void)!write(pipe_fds[1], r, sizeof r);
    _exit(0);
  }
  close(pipe_fds[1]);
  char r[5] = {'0', '0', '0', '0', '0'};
  if (child > 0) {
    (void)!read(pipe_fds[0], r, sizeof r);
    int ws;
    waitpid(child, &ws, 0);
  }
  char dir[4096];
  bool pids = make_cgroup("pids", "pids.max", "128", dir, sizeof dir);
  if (pids) rmdir(dir);
  bool memory = make_cgroup("memory", "memory.max", "max", dir, sizeof dir)
                || make_cgroup("memory", "memory.limit_in_bytes", "-1", dir, sizeof dir);
  if (memory) rmdir(dir);
  printf("userns=%c mountns=%c netns=%c pidns=%c proc=%c landlock=%d seccomp=%d cgroup_pids=%d cgroup_memory=%d "
         "root=%d\n",
         r[0], r[1], r[2], r[3], r[4], landlock, seccomp ? 1 : 0, pids ? 1 : 0, memory ? 1 : 0, getuid() == 0 ? 1 : 0);
  fflush(stdout);
  return 0;
}

} // namespace mcprt::sandbox_image
