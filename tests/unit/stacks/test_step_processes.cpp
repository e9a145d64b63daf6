#include <gtest/gtest.h>

#include "stacks/job_owner.h"
#include "stacks/step_processes.h"

using namespace gpudiag;

namespace {

// Real: `scontrol listpids 1` on the 22.05 test Slurm, job `sbatch -n2 --wrap "srun -n2 python3 ..."`
// with gpudiag.so loaded (its output relays are the task processes 2041 and 2042).
const char* kListpids = R"(PID      JOBID    STEPID   LOCALID GLOBALID
2041     1        0        0       0       
2042     1        0        1       1       
2045     1        0        -       -       
2044     1        0        -       -       
2024     1        batch    0       0       
2028     1        batch    -       -       
2025     1        batch    -       -       
)";

ProcStat proc(pid_t pid, pid_t ppid, const char* comm) {
  ProcStat s;
  s.pid = pid;
  s.ppid = ppid;
  s.comm = comm;
  return s;
}

// The same moment in /proc (ps --forest), plus an attacker's process that put
// SLURM_JOB_ID=1 in its environment: Slurm does not list it.
ProcTable table() {
  ProcTable t;
  for (const auto& s : {proc(1, 0, "systemd"), proc(2018, 1, "slurmstepd"), proc(2024, 2018, "slurm_script"),
                        proc(2025, 2024, "srun"), proc(2028, 2025, "srun"), proc(2035, 1, "slurmstepd"),
                        proc(2041, 2035, "slurmstepd"), proc(2045, 2041, "python3"), proc(2042, 2035, "slurmstepd"),
                        proc(2044, 2042, "python3"), proc(3131, 1, "sleep")})
    t[s.pid] = s;
  return t;
}

std::vector<ListedPid> listed() {
  auto l = parse_listpids(kListpids);
  EXPECT_TRUE(l) << l.error();
  return l ? *l : std::vector<ListedPid>{};
}

}  // namespace

TEST(Listpids, ParsesRealOutput) {
  auto l = listed();
  ASSERT_EQ(l.size(), 7u);
  EXPECT_EQ(l[0].pid, 2041);
  EXPECT_EQ(l[0].job, "1");
  EXPECT_EQ(l[0].step, "0");
  EXPECT_EQ(l[1].global_id, 1);
  EXPECT_EQ(l[2].global_id, -1);
  EXPECT_EQ(l[4].step, "batch");
}

// Seen on Slurm 22.05 while a step's task was exiting (e2e_stacks_in_slurm, once): a task
// without a process is listed with pid -1 among the live ones.
TEST(Listpids, ATaskWithoutAProcessIsSkipped) {
  auto l = parse_listpids("PID      JOBID    STEPID   LOCALID GLOBALID\n-1       4        1        0       0\n"
                          "4242     4        1        1       1\n");
  ASSERT_TRUE(l);
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ((*l)[0].pid, 4242);
  EXPECT_EQ((*l)[0].global_id, 1);
}

TEST(Listpids, RejectsWhatItCannotRead) {
  EXPECT_FALSE(parse_listpids("PID JOBID STEPID LOCALID GLOBALID\n12 1 0 0\n"));
  EXPECT_FALSE(parse_listpids("x 1 0 0 0\n"));
  EXPECT_FALSE(parse_listpids("12 1 0 0 99999999999999\n"));  // no exception either
  EXPECT_FALSE(parse_listpids("0 1 0 0 0\n"));
  EXPECT_FALSE(parse_listpids("-2 1 0 0 0\n"));
  auto empty = parse_listpids("PID      JOBID    STEPID   LOCALID GLOBALID\n");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
}

TEST(StepTaskRoots, ProgramsBehindTheRelaysWithTheirRanks) {
  auto roots = step_task_roots(listed(), table(), {"1", std::string("0")}, "");
  ASSERT_EQ(roots.size(), 2u);
  EXPECT_EQ(roots[0].pid, 2045);  // the program, not relay 2041
  EXPECT_EQ(roots[0].rank, 0);
  EXPECT_EQ(roots[1].pid, 2044);
  EXPECT_EQ(roots[1].rank, 1);
}

TEST(StepTaskRoots, WholeJobSkipsTheAskingStepAndOnlyListsSlurmsPids) {
  auto all = step_task_roots(listed(), table(), {"1", std::nullopt}, "");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[2].pid, 2024);  // the batch script
  EXPECT_EQ(all[2].step, "batch");
  for (const auto& t : all) EXPECT_NE(t.pid, 3131);
  auto skip = step_task_roots(listed(), table(), {"1", std::nullopt}, "0");
  ASSERT_EQ(skip.size(), 1u);
  EXPECT_EQ(skip[0].pid, 2024);
  EXPECT_TRUE(step_task_roots(listed(), table(), {"2", std::nullopt}, "").empty());
}

TEST(StepTaskRoots, WithoutTheRelayTheTaskIsTheProgram) {
  ProcTable t = table();
  t[2045] = proc(2045, 2035, "python3");  // exec'd directly by slurmstepd
  std::vector<ListedPid> l = {{2045, "1", "0", 0}};
  auto roots = step_task_roots(l, t, {"1", std::string("0")}, "");
  ASSERT_EQ(roots.size(), 1u);
  EXPECT_EQ(roots[0].pid, 2045);
}

TEST(JobOwner, ParsesSqueueUid) {
  auto uid = parse_squeue_uid("1001\n", "7");
  ASSERT_TRUE(uid) << uid.error();
  EXPECT_EQ(*uid, 1001u);
  auto gone = parse_squeue_uid("", "7");
  ASSERT_FALSE(gone);
  EXPECT_NE(gone.error().find("gpudiag: job 7 is not in Slurm's queue"), std::string::npos);
  EXPECT_FALSE(parse_squeue_uid("1001\n1002\n", "7"));
  EXPECT_FALSE(parse_squeue_uid("root", "7"));
  EXPECT_FALSE(parse_squeue_uid("4294967295", "7"));  // (uid_t)-1
  EXPECT_FALSE(parse_squeue_uid("9999999999", "7"));
}

// Issue 30: srun as the owner shows its environment to the owner (/proc/PID/environ), so
// it gets only what finds Slurm and prints text, and the owner's own names.
TEST(JobOwner, TheOwnersSrunGetsNoneOfRootsOtherVariables) {
  auto env = owner_environment({"PATH=/usr/sbin:/usr/bin", "SLURM_CONF=/etc/slurm/x.conf", "SLURM_CLUSTERS=a",
                                "LANG=C.UTF-8", "LC_ALL=C", "TZ=UTC", "HOME=/root", "USER=root", "LOGNAME=root",
                                "SSH_AUTH_SOCK=/tmp/ssh-x/agent.1", "VAULT_TOKEN=s.secret", "SLURM_JOB_ID=7",
                                "LD_PRELOAD=/root/x.so", "PATHOLOGICAL=1", "=odd", "NOEQUALS"},
                               "alice", "/home/alice");
  EXPECT_EQ(env, (std::vector<std::string>{"PATH=/usr/sbin:/usr/bin", "SLURM_CONF=/etc/slurm/x.conf",
                                           "SLURM_CLUSTERS=a", "LANG=C.UTF-8", "LC_ALL=C", "TZ=UTC",
                                           "HOME=/home/alice", "USER=alice", "LOGNAME=alice"}));
}

TEST(JobOwner, CredentialsOfAUserAndOfNoOne) {
  auto nobody = owner_credentials(65534, {"PATH=/bin", "SECRET=1"});
  if (!nobody) GTEST_SKIP() << nobody.error();
  EXPECT_EQ(nobody->uid, 65534u);
  EXPECT_FALSE(nobody->groups.empty());
  EXPECT_EQ(nobody->env[0], "PATH=/bin");
  EXPECT_EQ(nobody->env.size(), 4u);
  auto none = owner_credentials(3999999999u, {});
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().find("gpudiag: cannot switch to the job's owner (uid 3999999999): no such user on this host"),
            std::string::npos)
      << none.error();
}

TEST(StepId, ParsesAndRejects) {
  auto a = parse_step_id("1234.0");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->job, "1234");
  EXPECT_EQ(a->step, "0");
  EXPECT_FALSE(parse_step_id("1234")->step);
  for (const char* bad : {"", "12.x", "abc", ".1", "1.", "1;rm -rf"}) EXPECT_FALSE(parse_step_id(bad)) << bad;
}

TEST(Environ, FindsExactNames) {
  static const char kEnv[] = "SLURM_JOB_ID_X=9\0SLURM_JOB_ID=42\0EMPTY=\0";
  std::string env(kEnv, sizeof kEnv - 1);
  EXPECT_EQ(environ_value(env, "SLURM_JOB_ID"), "42");
  EXPECT_EQ(environ_value(env, "EMPTY"), "");
  EXPECT_FALSE(environ_value(env, "SLURM"));
}
