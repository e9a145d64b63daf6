// The rendezvous address (issue 22): MASTER_ADDR from Slurm's address for the step's
// first node, and the check that fails a step whose rendezvous cannot work.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <thread>
#include <string>
#include <vector>

#include "spank/preflight/rendezvous_check.h"
#include "spank/plan/step_plan.h"

using namespace gpudiag;

namespace {

std::optional<std::string> env_of(const EnvList& env, const std::string& name) {
  for (const auto& [k, v] : env)
    if (k == name) return v;
  return std::nullopt;
}

RendezvousFacts unresolved(const std::string& var, const std::string& host, bool user_set) {
  RendezvousFacts f;
  f.target.var = var;
  f.target.host = host;
  f.target.user_set = user_set;
  f.resolve_error = "Name or service not known";
  return f;
}

StepInputs task(int local_rank) {
  StepInputs in;
  in.ids.job_id = 7;
  in.ids.step_id = 0;
  in.ids.rank = local_rank;
  in.ids.world_size = 2;
  in.ids.local_rank = local_rank;
  in.ids.local_world_size = 2;
  in.ids.master_addr = "gpu001";
  in.env.nodename = "gpu017";
  in.hostname = "gpu017";
  return in;
}

}  // namespace

TEST(MasterAddr, EachModeAndItsFallback) {
  const SlurmNodeAddr slurm{"10.1.0.1", "gpu001-host"};
  EXPECT_EQ(choose_master_addr("auto", "gpu001", slurm), "10.1.0.1");
  EXPECT_EQ(choose_master_addr("address", "gpu001", slurm), "10.1.0.1");
  EXPECT_EQ(choose_master_addr("hostname", "gpu001", slurm), "gpu001-host");
  EXPECT_EQ(choose_master_addr("name", "gpu001", slurm), "gpu001");
  // Slurm told nothing (no node table in this process): the NodeName, as before.
  for (const char* mode : {"auto", "address", "hostname", "name"})
    EXPECT_EQ(choose_master_addr(mode, "gpu001", std::nullopt), "gpu001") << mode;
  EXPECT_EQ(choose_master_addr("hostname", "gpu001", SlurmNodeAddr{"10.1.0.1", ""}), "gpu001");
  EXPECT_EQ(choose_master_addr("auto", "gpu001", SlurmNodeAddr{"", "h"}), "gpu001");
  // Nothing that apply_env would refuse reaches the task.
  EXPECT_EQ(choose_master_addr("hostname", "gpu001", SlurmNodeAddr{"", "evil\nname"}), "gpu001");
}

TEST(MasterAddr, PlannedRendezvousEnvFollowsTheSwitches) {
  TaskIds ids;
  ids.job_id = 7;
  ids.master_addr = "10.1.0.1";
  PluginSettings p;
  auto env = planned_rendezvous_env(p, ids);
  EXPECT_EQ(env_of(env, "MASTER_ADDR"), "10.1.0.1");
  EXPECT_EQ(env_of(env, "PET_MASTER_ADDR"), "10.1.0.1");
  EXPECT_EQ(env_of(env, "MASTER_PORT"), env_of(env, "PET_MASTER_PORT"));
  EXPECT_FALSE(env_of(env, "RANK"));
  p.torch_env = false;
  env = planned_rendezvous_env(p, ids);
  EXPECT_FALSE(env_of(env, "MASTER_ADDR"));
  EXPECT_TRUE(env_of(env, "PET_MASTER_ADDR"));
  ids.master_addr.clear();
  EXPECT_TRUE(planned_rendezvous_env(p, ids).empty());
}

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

TEST(Rendezvous, VerdictNamesNodeAddressAndFix) {
  auto v = judge_rendezvous({unresolved("MASTER_ADDR", "gpu001", false)}, "gpu017", true, 3);
  ASSERT_TRUE(v.fail);
  EXPECT_EQ(*v.fail,
            "gpudiag: MASTER_ADDR gpu001 does not resolve on gpu017: Name or service not known; set "
            "plugin.master_addr: address in gpudiag.yaml (the node's NodeAddr), or fix name resolution "
            "(/etc/hosts, DNS)");
  // Without the preflight the plugin's own value only warns: the program may not be torch.
  v = judge_rendezvous({unresolved("MASTER_ADDR", "gpu001", false)}, "gpu017", false, 3);
  EXPECT_FALSE(v.fail);
  ASSERT_EQ(v.warnings.size(), 1u);
  EXPECT_NE(v.warnings[0].find("--diag=preflight makes this an error"), std::string::npos);
  // A value the user set fails either way, with the fix that is theirs to make.
  v = judge_rendezvous({unresolved("PET_MASTER_ADDR", "nohost", true)}, "gpu017", false, 3);
  ASSERT_TRUE(v.fail);
  EXPECT_EQ(v.fail->rfind("gpudiag: PET_MASTER_ADDR nohost does not resolve on gpu017: ", 0), 0u) << *v.fail;
  EXPECT_NE(v.fail->find("set PET_MASTER_ADDR to a name or address that resolves"), std::string::npos);

  RendezvousFacts slow = unresolved("MASTER_ADDR", "gpu001", true);
  slow.resolve_error.clear();
  slow.timed_out = true;
  v = judge_rendezvous({slow}, "gpu017", false, 3);
  ASSERT_TRUE(v.fail);
  EXPECT_NE(v.fail->find("did not resolve on gpu017 within 3 s"), std::string::npos);

  RendezvousFacts routeless;
  routeless.target = {"MASTER_ADDR", "10.9.9.9", 61007, false, false};
  routeless.addresses = {"10.9.9.9"};
  routeless.route_error = "Network is unreachable";
  v = judge_rendezvous({routeless}, "gpu017", true, 3);
  ASSERT_TRUE(v.fail);
  EXPECT_NE(v.fail->find("MASTER_ADDR 10.9.9.9 (10.9.9.9) cannot be reached from gpu017: Network is unreachable"),
            std::string::npos);

  RendezvousFacts taken;
  taken.target = {"MASTER_ADDR", "10.1.0.1", 61007, false, true};
  taken.addresses = {"10.1.0.1"};
  taken.bind_error = "Address already in use";
  v = judge_rendezvous({taken}, "gpu001", true, 3);
  ASSERT_TRUE(v.fail);
  EXPECT_NE(v.fail->find("port 61007 for MASTER_ADDR cannot be bound on gpu001: Address already in use"),
            std::string::npos);

  RendezvousFacts fine;
  fine.target = {"MASTER_ADDR", "10.1.0.1", 61007, true, false};
  fine.addresses = {"10.1.0.1"};
  v = judge_rendezvous({fine}, "gpu017", true, 3);
  EXPECT_FALSE(v.fail);
  EXPECT_TRUE(v.warnings.empty());
}

TEST(Rendezvous, PlanFailsEveryTaskAndWarnsOnce) {
  StepInputs in = task(1);
  in.rendezvous = {unresolved("MASTER_ADDR", "gpu001", false)};
  StepPlan plan = plan_step(in);
  EXPECT_FALSE(plan.fail);
  EXPECT_TRUE(plan.notices.empty());  // local task 0 says it
  in = task(0);
  in.rendezvous = {unresolved("MASTER_ADDR", "gpu001", false)};
  plan = plan_step(in);
  EXPECT_FALSE(plan.fail);
  ASSERT_EQ(plan.notices.size(), 1u);
  EXPECT_NE(plan.notices[0].find("on gpu017"), std::string::npos);
  EXPECT_EQ(env_of(plan.env, "MASTER_ADDR"), "gpu001");

  in.diag = *parse_diag_list("preflight");
  for (int local : {0, 1}) {
    in.ids.local_rank = local;
    plan = plan_step(in);
    ASSERT_TRUE(plan.fail) << local;
    EXPECT_TRUE(plan.env.empty());
  }
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
