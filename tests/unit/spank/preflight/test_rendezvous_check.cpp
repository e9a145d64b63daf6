// The rendezvous check's gathering (issue 22): the targets the program will see, a lookup
// that hangs cut at its deadline, and the facts on this host.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <string>
#include <vector>

#include "spank/preflight/rendezvous_check.h"

using namespace gpudiag;

TEST(Rendezvous, TargetsAreWhatTheProgramWillSee) {
  const EnvList plugin{{"MASTER_ADDR", "10.1.0.1"}, {"MASTER_PORT", "61007"},
                       {"PET_MASTER_ADDR", "10.1.0.1"}, {"PET_MASTER_PORT", "61007"}};
  auto t = rendezvous_targets({}, plugin, true);
  ASSERT_EQ(t.size(), 1u);  // one host, checked once
  EXPECT_EQ(t[0].host, "10.1.0.1");
  EXPECT_EQ(t[0].port, 61007);
  EXPECT_FALSE(t[0].user_set);
  EXPECT_TRUE(t[0].bind_here);
  EXPECT_FALSE(rendezvous_targets({}, plugin, false)[0].bind_here);

  // The user's values win, as apply_env keeps them, and are never bound here.
  t = rendezvous_targets({{"MASTER_ADDR", "head"}, {"PET_RDZV_ENDPOINT", "[fe80::1]:29400"}}, plugin, true);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].var, "MASTER_ADDR");
  EXPECT_EQ(t[0].host, "head");
  EXPECT_TRUE(t[0].user_set);
  EXPECT_FALSE(t[0].bind_here);
  EXPECT_EQ(t[1].var, "PET_MASTER_ADDR");
  EXPECT_EQ(t[2].host, "fe80::1");
  EXPECT_EQ(t[2].port, 29400);
  EXPECT_TRUE(t[2].user_set);

  t = rendezvous_targets({{"PET_RDZV_ENDPOINT", "head:29400"}, {"PET_MASTER_ADDR", "head"}}, {}, true);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].var, "PET_MASTER_ADDR");
  EXPECT_TRUE(t[0].user_set);
  // A user's port moves the store: the plugin's address is then not bound here either.
  t = rendezvous_targets({{"MASTER_PORT", "1234"}}, plugin, true);
  EXPECT_EQ(t[0].port, 1234);
  EXPECT_FALSE(t[0].bind_here);
  EXPECT_TRUE(rendezvous_targets({}, {}, true).empty());
}

// A resolver that does not answer, as getaddrinfo does while a dead DNS server times out.
static int hanging_lookup(const char*, const char*, const struct addrinfo*, struct addrinfo**) {
  std::this_thread::sleep_for(std::chrono::seconds(3));
  return EAI_AGAIN;
}

TEST(Rendezvous, ALookupThatHangsIsCutAtTheDeadline) {
  RendezvousTarget t{"MASTER_ADDR", "gpu001", 61007, false, true};
  auto f = gather_rendezvous(t, 0.2, hanging_lookup);
  EXPECT_TRUE(f.timed_out);
  EXPECT_TRUE(f.addresses.empty());
  EXPECT_EQ(f.bind_error, "");  // nothing more is tried without an address
  auto v = judge_rendezvous({f}, "gpu017", true, 0.2);
  ASSERT_TRUE(v.fail);
  EXPECT_NE(v.fail->find("MASTER_ADDR gpu001 did not resolve on gpu017 within 0.2 s"), std::string::npos) << *v.fail;
}

// Which thread asked, and with which flags: a numeric address is looked up in place,
// without a resolver; a name on its own thread, under the deadline.
static std::thread::id g_lookup_thread;
static int g_lookup_flags = -1;
static int recording_lookup(const char* node, const char* service, const struct addrinfo* hints,
                            struct addrinfo** res) {
  g_lookup_thread = std::this_thread::get_id();
  g_lookup_flags = hints ? hints->ai_flags : -1;
  return ::getaddrinfo(node, service, hints, res);
}

TEST(Rendezvous, ANumericAddressIsLookedUpWithoutAThread) {
  for (const char* host : {"127.0.0.1", "::1"}) {
    RendezvousTarget t{"MASTER_ADDR", host, 0, false, false};
    g_lookup_thread = {};
    auto f = gather_rendezvous(t, 5, recording_lookup);
    EXPECT_EQ(g_lookup_thread, std::this_thread::get_id()) << host;
    EXPECT_EQ(g_lookup_flags, AI_NUMERICHOST) << host;
    EXPECT_EQ(f.resolve_error, "") << host;
    ASSERT_EQ(f.addresses.size(), 1u) << host;
    EXPECT_EQ(f.addresses[0], host);
  }
  RendezvousTarget name{"MASTER_ADDR", "localhost", 0, false, false};
  g_lookup_thread = {};
  auto f = gather_rendezvous(name, 5, recording_lookup);
  EXPECT_NE(g_lookup_thread, std::this_thread::get_id());
  EXPECT_EQ(g_lookup_flags, 0);
  EXPECT_FALSE(f.addresses.empty());
}

// The resolver's thread may outlive the step in slurmstepd: it takes none of its signals,
// and a resolver that throws (out of memory) ends the lookup instead of the process.
static bool g_every_signal_blocked = false;
static int masked_lookup(const char*, const char*, const struct addrinfo*, struct addrinfo**) {
  sigset_t now;
  ::pthread_sigmask(SIG_SETMASK, nullptr, &now);
  g_every_signal_blocked = sigismember(&now, SIGTERM) == 1 && sigismember(&now, SIGINT) == 1 &&
                           sigismember(&now, SIGCHLD) == 1 && sigismember(&now, SIGUSR2) == 1;
  return EAI_NONAME;
}
static int throwing_lookup(const char*, const char*, const struct addrinfo*, struct addrinfo**) {
  throw std::bad_alloc();
}

TEST(Rendezvous, TheResolversThreadTakesNoSignalAndNothingLeavesIt) {
  RendezvousTarget t{"MASTER_ADDR", "gpu001", 61007, false, false};
  auto f = gather_rendezvous(t, 5, masked_lookup);
  EXPECT_TRUE(g_every_signal_blocked);
  EXPECT_FALSE(f.timed_out);
  EXPECT_NE(f.resolve_error, "");
  f = gather_rendezvous(t, 5, throwing_lookup);
  EXPECT_FALSE(f.timed_out);
  EXPECT_EQ(f.resolve_error, ::gai_strerror(EAI_MEMORY));
}

// The gathering half, on this machine's own resolver and sockets.
TEST(Rendezvous, GatherOnThisHost) {
  RendezvousTarget t{"MASTER_ADDR", "localhost", 0, false, false};
  auto f = gather_rendezvous(t, 5);
  EXPECT_FALSE(f.timed_out);
  EXPECT_EQ(f.resolve_error, "");
  EXPECT_FALSE(f.addresses.empty());
  EXPECT_EQ(f.route_error, "");

  t.host = "gpudiag-test-node.invalid";  // RFC 6761: never resolves
  f = gather_rendezvous(t, 5);
  EXPECT_TRUE(!f.resolve_error.empty() || f.timed_out);

  t.host = "127.0.0.1";
  int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  struct sockaddr_in6 a {};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_any;
  ASSERT_EQ(::bind(fd, reinterpret_cast<struct sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<struct sockaddr*>(&a), &len), 0);
  t.port = ntohs(a.sin6_port);
  t.bind_here = true;
  f = gather_rendezvous(t, 5);
  EXPECT_NE(f.bind_error, "");  // a listener holds it
  ::close(fd);
  f = gather_rendezvous(t, 5);
  EXPECT_EQ(f.bind_error, "");
}

// GLOO_SOCKET_IFNAME comes from local_interface: for every address of this host that a
// rendezvous could name, the interface that holds it, as getifaddrs (and Gloo) names it.
// IPv4 takes a quicker way than getifaddrs (SIOCGIFCONF); both must agree.
TEST(Rendezvous, TheInterfaceIsTheOneGetifaddrsNames) {
  struct ifaddrs* list = nullptr;
  ASSERT_EQ(::getifaddrs(&list), 0);
  std::vector<std::pair<std::string, std::string>> want;  // address, first interface holding it
  for (struct ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) continue;
    if (i->ifa_addr->sa_family == AF_INET6 &&
        IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr))
      continue;  // needs a scope a MASTER_ADDR does not carry
    const socklen_t len = i->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    char host[NI_MAXHOST];
    ASSERT_EQ(::getnameinfo(i->ifa_addr, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST), 0);
    bool seen = false;
    for (const auto& w : want) seen = seen || w.first == host;
    if (!seen) want.emplace_back(host, i->ifa_name);
  }
  ::freeifaddrs(list);
  bool v4 = false;
  for (const auto& [address, name] : want) {
    v4 = v4 || address.find(':') == std::string::npos;
    RendezvousTarget t{"MASTER_ADDR", address, 29500, false, false};
    auto f = gather_rendezvous(t, 5);
    EXPECT_EQ(f.route_error, "") << address;
    EXPECT_EQ(f.local_interface, name) << address;
  }
  EXPECT_TRUE(v4) << "no IPv4 address here: the quicker way went untested";
}

namespace {
struct ifreq v4_entry(const char* name, const char* address) {
  struct ifreq r {};
  std::memcpy(r.ifr_name, name, std::min(std::strlen(name), sizeof r.ifr_name));
  struct sockaddr_in a {};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, address, &a.sin_addr);
  std::memcpy(&r.ifr_addr, &a, sizeof a);
  return r;
}
}  // namespace

// The quick way names an interface only where it cannot disagree with getifaddrs: one
// holder. An address on two interfaces (adversary review 6) goes to getifaddrs, whose order
// Gloo shares; a 16-byte name with no NUL is taken whole.
TEST(Rendezvous, SIOCGIFCONFNamesOnlyTheSoleHolder) {
  struct in_addr want {};
  ::inet_pton(AF_INET, "10.0.0.7", &want);
  const struct ifreq one[] = {v4_entry("lo", "127.0.0.1"), v4_entry("eth0:1", "10.0.0.7"), v4_entry("eth1", "10.0.1.7")};
  EXPECT_EQ(sole_ipv4_holder(one, 3, want), "eth0:1");
  const struct ifreq two[] = {v4_entry("big", "10.0.0.7"), v4_entry("small", "10.0.0.7")};
  EXPECT_EQ(sole_ipv4_holder(two, 2, want), "");
  EXPECT_EQ(sole_ipv4_holder(one, 1, want), "") << "only what the kernel listed counts";
  const struct ifreq full[] = {v4_entry("abcdefghijklmnop", "10.0.0.7")};
  EXPECT_EQ(sole_ipv4_holder(full, 1, want), "abcdefghijklmnop");
}
