// Two hosts in miniature for the tests that need them: two network namespaces joined by a veth
// pair (10.231.0.1 in `a`, 10.231.0.2 in `b`), made by iproute2 (root), removed afterwards;
// cut() takes the link down on both sides, a network partition. `ok` false and `why` say what
// could not be made.
//
//   cohort::test::namespaces ns;
//   if (!ns.ok) FAIL(ns.why);
//   cohort::test::sh("ip netns exec " + ns.a + " ip addr");   // runs inside namespace a
//   ns.cut();                                                  // nothing passes between a and b
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace cohort::test {

/// Runs `cmd` in a shell, its output discarded; its exit status.
inline int sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

struct namespaces {
  std::string a, b, va, vb;
  bool ok = false;
  std::string why;
  namespaces() {
    const std::string id = std::to_string(::getpid() % 100000);
    a = "cohort-a" + id;
    b = "cohort-b" + id;
    va = "cva" + id;
    vb = "cvb" + id;
    const std::string steps[] = {"ip netns add " + a,
                                 "ip netns add " + b,
                                 "ip link add " + va + " type veth peer name " + vb,
                                 "ip link set " + va + " netns " + a,
                                 "ip link set " + vb + " netns " + b,
                                 "ip -n " + a + " addr add 10.231.0.1/24 dev " + va,
                                 "ip -n " + b + " addr add 10.231.0.2/24 dev " + vb,
                                 "ip -n " + a + " link set " + va + " up",
                                 "ip -n " + b + " link set " + vb + " up",
                                 "ip -n " + a + " link set lo up",
                                 "ip -n " + b + " link set lo up"};
    for (const auto& s : steps)
      if (sh(s) != 0) {
        why = "'" + s + "' failed";
        return;
      }
    ok = true;
  }
  /// A partition: the link goes down on both sides (frames are dropped, no connection resets).
  void cut() {
    sh("ip -n " + a + " link set " + va + " down");
    sh("ip -n " + b + " link set " + vb + " down");
  }
  ~namespaces() {
    sh("ip netns del " + a);
    sh("ip netns del " + b);
    // `ip netns add` makes /run/netns a mount point; leave none behind when no namespace is left
    std::error_code ec;
    if (std::filesystem::is_empty("/run/netns", ec) && !ec) sh("umount /run/netns");
  }
};

/// True when the test must skip because namespaces cannot be made and COHORT_SKIP_NETNS=1 says
/// so (it says it skipped); fails the test when they cannot be made otherwise.
inline bool skip_without(const namespaces& ns) {
  if (ns.ok) return false;
  const char* skip = std::getenv("COHORT_SKIP_NETNS");
  if (skip != nullptr && std::string(skip) == "1") {
    MESSAGE("skipped: cannot create network namespaces here (" << ns.why << "); COHORT_SKIP_NETNS=1");
    return true;
  }
  FAIL("cannot create network namespaces (needs root and iproute2): " << ns.why
                                                                      << "; set COHORT_SKIP_NETNS=1 to skip this test");
  return true;
}

}  // namespace cohort::test
