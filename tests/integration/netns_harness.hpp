// Network-namespace lab for multi-host tests without containers: one namespace per node and one
// for the integrator, each with its own address on a private /24, their veth cables plugged into a
// bridge that lives in a "switch" namespace; the test process (root namespace) reaches them through
// one more veth into that bridge.
//
//   root ns  <link><pid> 10.A.B.1 ─┐
//   <ns><pid>-n0  eth0 10.A.B.10 ──┼── br0 in <ns><pid>-sw (ports: root, n0, n1, ..., in)
//   <ns><pid>-n1  eth0 10.A.B.11 ──┤
//   <ns><pid>-in  eth0 10.A.B.100 ─┘
//
// The bridge sits in its own namespace so that the root's firewall (br_netfilter, Docker's FORWARD
// policy) never sees the bridged traffic. NetLab's destructor removes every namespace and link it
// made (and with them whatever qdiscs or nftables rules were put inside); CleanStale removes those of
// earlier runs whose test process is gone; NetLabSignalCleanup covers SIGINT/SIGTERM/SIGHUP/SIGABRT.
// Processes started through InNamespace die with the test process (PR_SET_PDEATHSIG via setpriv).
// Thread-safety: NetLab and the helpers are for the test's main thread; Sh may run on any thread.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace search::testing {

struct ShResult {
  int rc = -1;
  std::string out;  // stdout and stderr
};

// Runs a shell command line (built only from names and numbers the tests make).
inline ShResult Sh(const std::string& cmd) {
  ShResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

inline std::string FirstExecutable(std::initializer_list<const char*> paths) {
  for (const char* p : paths)
    if (::access(p, X_OK) == 0) return p;
  return "";
}

inline bool PidAlive(pid_t pid) {
  return ::kill(pid, 0) == 0 || errno == EPERM;
}

inline std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

// Namespaces whose name starts with `prefix` (`ip netns list` prints "NAME" or "NAME (id: N)").
inline std::vector<std::string> OurNamespaces(const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& l : Lines(Sh("ip netns list").out)) {
    const std::string name = l.substr(0, l.find(' '));
    if (name.rfind(prefix, 0) == 0) out.push_back(name);
  }
  return out;
}

// Kills what still runs in namespace `ns` (only processes of our own runs live there), deletes it.
inline void DeleteNamespace(const std::string& ns) {
  for (const auto& l : Lines(Sh("ip netns pids " + ns).out)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(l.c_str()));
    if (pid > 1 && pid != ::getpid()) {
      ::kill(pid, SIGCONT);  // a stopped process dies of SIGKILL too, but let it go at once
      ::kill(pid, SIGKILL);
    }
  }
  (void)Sh("ip netns del " + ns);
}

// Removes namespaces (<ns_prefix><pid>-...) and root links (<link_prefix><pid>) of earlier runs
// whose test process is gone. REQUIRES: the prefixes are plain letters and dashes.
inline void CleanStale(const std::string& ns_prefix, const std::string& link_prefix) {
  const std::regex ns_re(ns_prefix + "([0-9]+)-.*");
  for (const auto& ns : OurNamespaces(ns_prefix)) {
    std::smatch m;
    if (!std::regex_match(ns, m, ns_re)) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(m[1]));
    if (pid != ::getpid() && !PidAlive(pid)) DeleteNamespace(ns);
  }
  const std::regex link_re("[0-9]+: (" + link_prefix + "([0-9]+))[@:].*");
  for (const auto& l : Lines(Sh("ip -o link show").out)) {
    std::smatch m;
    if (!std::regex_match(l, m, link_re)) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(m[2]));
    if (pid != ::getpid() && !PidAlive(pid)) (void)Sh("ip link del " + m[1].str());
  }
}

// argv run inside namespace `ns`, dying with this process (setpriv sets PR_SET_PDEATHSIG, which
// execve keeps; `ip netns exec` execs the command without forking, so the pid is the server's).
inline std::vector<std::string> InNamespace(const std::string& setpriv, const std::string& ip, const std::string& ns,
                                            const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  if (!setpriv.empty()) out = {setpriv, "--pdeathsig", "KILL", "--"};
  for (const std::string& a : {ip, std::string("netns"), std::string("exec"), ns}) out.push_back(a);
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

// The namespaces, the bridge and the veth cables of one run; the destructor removes all of them.
// Namespaces are named <ns_prefix><pid>-<role> (roles sw, n0..n<nodes-1>, in), the root link
// <link_prefix><pid> (at most 15 characters: keep link_prefix short).
class NetLab {
 public:
  NetLab(std::string ns_prefix, std::string link_prefix, uint32_t nodes)
      : pid_(::getpid()), ns_prefix_(std::move(ns_prefix)), link_prefix_(std::move(link_prefix)), nodes_(nodes) {}
  NetLab(const NetLab&) = delete;
  NetLab& operator=(const NetLab&) = delete;
  ~NetLab() { Teardown(); }

  // Builds the network. On failure returns the reason; `*missing_capability` tells a host that
  // cannot do this (no netns, veth or bridge support) from a broken setup.
  std::string Setup(bool* missing_capability) {
    *missing_capability = false;
    // One run at a time picks and claims its subnet; others wait for the lock, not collide.
    const int lock_fd = ::open("/tmp/gsnt-netns.lock", O_CREAT | O_RDWR, 0600);
    if (lock_fd >= 0) ::flock(lock_fd, LOCK_EX);
    std::string err = SetupLocked(missing_capability);
    if (lock_fd >= 0) ::close(lock_fd);  // releases the lock
    return err;
  }

  void Teardown() {
    if (!root_link_.empty()) (void)Sh("ip link del " + root_link_);
    root_link_.clear();
    for (auto it = namespaces_.rbegin(); it != namespaces_.rend(); ++it) DeleteNamespace(*it);
    namespaces_.clear();
  }

  std::string NodeNs(uint32_t i) const { return Ns("n" + std::to_string(i)); }
  std::string IntegratorNs() const { return Ns("in"); }
  std::string SwitchNs() const { return Ns("sw"); }
  // Node i's port on the bridge (in SwitchNs); the node's own end is eth0 in NodeNs(i).
  static std::string SwitchPort(uint32_t i) { return "n" + std::to_string(i); }
  std::string NodeAddr(uint32_t i) const { return Addr(10 + i); }
  std::string IntegratorAddr() const { return Addr(100); }
  std::string RootLink() const { return link_prefix_ + std::to_string(pid_); }
  const std::vector<std::string>& namespaces() const { return namespaces_; }

  // Plugs node i's cable out of (or back into) the switch: its port on the bridge goes down/up.
  bool SetSwitchPort(uint32_t i, bool up) {
    return Sh("ip -n " + SwitchNs() + " link set " + SwitchPort(i) + (up ? " up" : " down")).rc == 0;
  }
  // Takes node i's own interface down/up inside its namespace. Up restores its connected route
  // (the address stays on the interface while it is down).
  bool SetNodeInterface(uint32_t i, bool up) {
    return Sh("ip -n " + NodeNs(i) + " link set eth0" + (up ? " up" : " down")).rc == 0;
  }

 private:
  std::string Ns(const std::string& role) const { return ns_prefix_ + std::to_string(pid_) + "-" + role; }
  std::string Addr(uint32_t host) const {
    return "10." + std::to_string(a_) + "." + std::to_string(b_) + "." + std::to_string(host);
  }

  // A /24 under 10.200.0.0/13 that no route of the root namespace covers (the default route aside).
  bool PickSubnet() {
    for (uint32_t t = 0; t < 64; ++t) {
      a_ = 200 + (static_cast<uint32_t>(pid_) + t) % 50;
      b_ = (static_cast<uint32_t>(pid_) / 50 + t * 37) % 256;
      bool taken = false;
      for (const auto& l : Lines(Sh("ip -4 route show match " + Addr(0) + "/24").out))
        taken |= l.rfind("default", 0) != 0;
      if (!taken) return true;
    }
    return false;
  }

  std::string AddNamespace(const std::string& ns, bool* missing_capability) {
    auto r = Sh("ip netns add " + ns);
    if (r.rc != 0) {
      *missing_capability = true;
      return "ip netns add " + ns + ": " + r.out;
    }
    namespaces_.push_back(ns);
    return "";
  }

  std::string SetupLocked(bool* missing_capability) {
    if (!PickSubnet()) return "no free 10.200-249.x.0/24 subnet";
    const std::string sw = SwitchNs();
    if (auto e = AddNamespace(sw, missing_capability); !e.empty()) return e;
    std::vector<std::pair<std::string, std::string>> hosts;  // (port name on the bridge, namespace)
    for (uint32_t i = 0; i < nodes_; ++i) hosts.emplace_back(SwitchPort(i), NodeNs(i));
    hosts.emplace_back("in", IntegratorNs());
    for (const auto& h : hosts)
      if (auto e = AddNamespace(h.second, missing_capability); !e.empty()) return e;

    auto run = [](const std::string& cmd) -> std::string {
      auto r = Sh(cmd);
      return r.rc == 0 ? "" : cmd + ": " + r.out;
    };
    if (auto e = run("ip -n " + sw + " link add br0 type bridge"); !e.empty()) {
      *missing_capability = true;
      return e;
    }
    std::vector<std::string> cmds = {"ip -n " + sw + " link set lo up", "ip -n " + sw + " link set br0 up"};
    for (size_t h = 0; h < hosts.size(); ++h) {
      const auto& [port, ns] = hosts[h];
      const std::string veth = "ip -n " + sw + " link add " + port + " type veth peer name eth0 netns " + ns;
      if (h == 0) {
        if (auto e = run(veth); !e.empty()) {
          *missing_capability = true;
          return e;
        }
      } else {
        cmds.push_back(veth);
      }
      const std::string addr = h < nodes_ ? NodeAddr(static_cast<uint32_t>(h)) : IntegratorAddr();
      cmds.push_back("ip -n " + sw + " link set " + port + " master br0 up");
      cmds.push_back("ip -n " + ns + " link set lo up");
      cmds.push_back("ip -n " + ns + " addr add " + addr + "/24 dev eth0");
      cmds.push_back("ip -n " + ns + " link set eth0 up");
    }
    for (const auto& c : cmds)
      if (auto e = run(c); !e.empty()) return e;
    // The test process's cable into the switch: created straight into both namespaces.
    if (auto e = run("ip link add " + RootLink() + " type veth peer name root netns " + sw); !e.empty()) return e;
    root_link_ = RootLink();
    for (const auto& c : {"ip -n " + sw + " link set root master br0 up",
                          "ip addr add " + Addr(1) + "/24 dev " + root_link_, "ip link set " + root_link_ + " up"})
      if (auto e = run(c); !e.empty()) return e;
    return "";
  }

  pid_t pid_;
  std::string ns_prefix_, link_prefix_;
  uint32_t nodes_;
  uint32_t a_ = 0, b_ = 0;
  std::vector<std::string> namespaces_;  // created, in order
  std::string root_link_;
};

// While alive: SIGINT, SIGTERM, SIGHUP or SIGABRT replace this process (execve, which is
// async-signal-safe) with a shell that kills every process in the lab's namespaces, deletes them
// and the root link, and exits 128+signal; the destructor restores the previous handlers. One at
// a time per process. REQUIRES: the lab is set up; `ip` is an absolute path.
// The start of a namespace test's SetUp: root, iproute2, the namespaces a crashed earlier run left
// removed, then the lab of `nodes` namespaces set up. Returns why the test must skip ("" when it
// may run); a setup failure the machine should not have is left in *error.
inline std::string StartNetLab(const std::string& ns_prefix, const std::string& link_prefix, size_t nodes,
                               std::string* ip, std::unique_ptr<NetLab>* lab, std::string* error) {
  if (::geteuid() != 0) return "needs root for ip netns";
  *ip = FirstExecutable({"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"});
  if (ip->empty()) return "no ip (iproute2) binary";
  CleanStale(ns_prefix, link_prefix);
  *lab = std::make_unique<NetLab>(ns_prefix, link_prefix, nodes);
  bool missing = false;
  *error = (*lab)->Setup(&missing);
  if (missing) return "network namespaces unavailable: " + *error;
  return "";
}

// The end of a namespace test's TearDown: the lab torn down, then what this process left behind
// (namespaces of this pid, the root link), which should be nothing.
inline std::vector<std::string> CloseNetLab(std::unique_ptr<NetLab>* lab, const std::string& ns_prefix) {
  std::vector<std::string> left;
  if (!*lab) return left;
  const std::string root_link = (*lab)->RootLink();
  lab->reset();
  const std::string mine = ns_prefix + std::to_string(::getpid()) + "-";
  for (const auto& ns : OurNamespaces(ns_prefix))
    if (ns.rfind(mine, 0) == 0) left.push_back(ns);
  if (Sh("ip link show " + root_link).rc == 0) left.push_back(root_link);
  return left;
}

class NetLabSignalCleanup {
 public:
  NetLabSignalCleanup(const NetLab& lab, const std::string& ip) {
    std::string s = "for ns in";
    for (const auto& ns : lab.namespaces()) s += " " + ns;
    s += "; do for p in $(" + ip + " netns pids $ns 2>/dev/null); do kill -CONT $p; kill -KILL $p; done; " + ip +
         " netns del $ns 2>/dev/null; done; " + ip + " link del " + lab.RootLink() +
         " 2>/dev/null; echo \"signal $1: namespaces and processes of this test removed\" >&2; exit $((128 + $1))";
    if (s.size() >= sizeof(Script())) return;  // too many namespaces for the buffer: no handler
    std::memcpy(Script(), s.c_str(), s.size() + 1);
    struct sigaction sa {};
    sa.sa_handler = &OnSignal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < kSignals.size(); ++i) installed_[i] = ::sigaction(kSignals[i], &sa, &old_[i]) == 0;
  }
  NetLabSignalCleanup(const NetLabSignalCleanup&) = delete;
  NetLabSignalCleanup& operator=(const NetLabSignalCleanup&) = delete;
  ~NetLabSignalCleanup() {
    for (size_t i = 0; i < kSignals.size(); ++i)
      if (installed_[i]) ::sigaction(kSignals[i], &old_[i], nullptr);
  }

 private:
  static constexpr std::array<int, 4> kSignals = {SIGINT, SIGTERM, SIGHUP, SIGABRT};
  static char (&Script())[16384] {
    static char script[16384];
    return script;
  }
  static void OnSignal(int sig) {
    static const char* const kNumbers[] = {"0", "1", "2",  "3",  "4",  "5",  "6",  "7",
                                           "8", "9", "10", "11", "12", "13", "14", "15"};
    char sh[] = "sh", dash_c[] = "-c";
    char* const argv[] = {sh,     dash_c, Script(), sh, const_cast<char*>(sig >= 0 && sig < 16 ? kNumbers[sig] : "15"),
                          nullptr};
    ::execve("/bin/sh", argv, environ);
    _exit(128 + sig);
  }
  std::array<struct sigaction, 4> old_{};
  std::array<bool, 4> installed_{};
};

}  // namespace search::testing
