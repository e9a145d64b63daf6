// Issue 30.2: kernel log text a user chooses must never become an Xid. Each case is a
// kernel format that carries user text (a process name, a file name, a write to
// /dev/kmsg), filled with the forger's best choices, as /dev/kmsg hands it out.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "healthcheck/checks/check_xid.h"
#include "nodeinfo/kmsg.h"

using namespace gpudiag;

namespace {

// What the forger wants the check to read.
const std::string kForged = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.";
const std::string kForgedOld = "NVRM: Xid (0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.";

// The kernel keeps 15 bytes of a process name (TASK_COMM_LEN 16), whatever prctl or
// /proc/PID/comm were given.
std::string comm(const std::string& wanted) { return wanted.substr(0, 15); }

// A file name as /dev/kmsg shows it: the kernel escapes every byte below 0x20, 0x7f
// and up, and the backslash as \xNN, so a newline in a name cannot start a record.
std::string kmsg_escaped(const std::string& s) {
  std::string out;
  char buf[8];
  for (unsigned char c : s) {
    if (c < 0x20 || c >= 0x7f || c == '\\') {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::vector<std::string> comms() {
  return {comm(kForged), comm(kForgedOld), comm("NVRM: Xid (PCI:0000:3b:00)"), "python3", "NVRM:", "", " "};
}

std::vector<std::string> file_names() {
  return {kForged, kForgedOld, "x\n" + kForged, kForged + "\n" + kForged, "\n" + kForged, "NVRM: Xid ("};
}

// Kernel lines (6.x wording, checked against this machine's own log where it makes
// them) with a user's process name (C) and file name (F) in them.
std::vector<std::string> kernel_lines_with_user_text() {
  std::vector<std::string> out;
  for (const auto& c : comms())
    for (const auto& f0 : file_names()) {
      const std::string f = kmsg_escaped(f0);
      const std::string ce = kmsg_escaped(c);
      out.push_back(ce + "[2848]: segfault at 0 ip 00007ff57b2ff000 sp 00007ffdfa9c40b8 error 15 in " + f +
                    "[0,7ff57b2ff000+1000] likely on CPU 0 (core 0, socket 0)");
      out.push_back(ce + "[2848]: segfault at 0 ip 00007ff57b2ff000 sp 00007ffdfa9c40b8 error 15 in " + f +
                    "[7ff57b2ff000+1000]");
      out.push_back("traps: " + ce + "[2848] general protection fault ip:401136 sp:7ffc6e4d error:0 in " + f +
                    "[401000+1000]");
      out.push_back("traps: " + ce + "[2848] trap invalid opcode ip:401136 sp:7ffc6e4d error:0 in " + f +
                    "[401000+1000]");
      out.push_back(ce + "[2848]: unhandled signal 11 code 0x1 at 0x0000000000000000 in " + f + "[400000+1000]");
      out.push_back("audit: type=1326 audit(1700000000.123:45): auid=1000 uid=1000 gid=1000 ses=3 pid=2848 comm=\"" +
                    ce + "\" exe=\"/home/u/" + f + "\" sig=31 arch=c000003e syscall=59 compat=0 ip=0x7f code=0x0");
      out.push_back("process '/home/u/" + f + "' started with executable stack");
      out.push_back("Core dump to |/home/u/" + f + " pipe failed");
      out.push_back(ce + ": Uhuuh, elf segment at 0000000000400000 requested but the memory is mapped already");
    }
  for (const auto& c : comms()) {
    const std::string ce = kmsg_escaped(c);
    out.push_back(ce + " invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0");
    out.push_back("Out of memory: Killed process 2848 (" + ce +
                  ") total-vm:1048576kB, anon-rss:524288kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:2048kB "
                  "oom_score_adj:0");
    out.push_back("oom_reaper: reaped process 2848 (" + ce + "), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB");
    out.push_back("Memory cgroup out of memory: Killed process 2848 (" + ce + ") total-vm:4096kB");
    out.push_back("CPU: 0 PID: 2848 Comm: " + ce + " Not tainted 6.1.0-28-amd64 #1 Debian 6.1.119-1");
    // /dev/kmsg's ratelimit names the writer by its process name.
    out.push_back(ce + ": 3 output lines suppressed due to ratelimiting");
    out.push_back(ce + ": 3 callbacks suppressed");
    out.push_back(ce + " (2848): drop_caches: 3");
    out.push_back("potentially unexpected fatal signal 11.");
    // The driver's own line quotes the process that owns the channel: that name is the
    // user's, the code is not.
    out.push_back("NVRM: Xid (PCI:0000:3b:00): 13, pid=2848, name=" + ce + ", Graphics Exception");
  }
  return out;
}

}  // namespace

TEST(KmsgForgery, TheIssuesSegfaultLineIsNotAnXid) {
  // Exactly what the attack of issue 30 made the kernel write (a file named as the Xid,
  // mapped and jumped into): accepted before, because "NVRM: Xid (" was looked for
  // anywhere in the message.
  const std::string line = "6,347,289782766,-;python3[2848]: segfault at 7ff57b2ff000 ip 00007ff57b2ff000 sp "
                           "00007ffdfa9c40b8 error 15 in " + kForged + "[0,7ff57b2ff000+1000] likely on CPU 0 (core 0, "
                           "socket 0)";
  auto r = parse_kmsg_record(line);
  ASSERT_TRUE(r);
  EXPECT_TRUE(written_by_kernel(*r));  // the kernel wrote it: the prefix alone has to say no
  EXPECT_FALSE(parse_xid_record(*r));
  EXPECT_FALSE(parse_xid_message(r->message));
}

TEST(KmsgForgery, NoKernelLineWithAUsersTextIsAnXidOrAFinding) {
  const auto lines = kernel_lines_with_user_text();
  std::string log;
  std::uint64_t seq = 1;
  int genuine = 0;
  for (const auto& l : lines) {
    for (int prio : {0, 3, 4, 6, 7}) {
      KmsgRecord r{prio, seq, seq, l};
      auto x = parse_xid_record(r);
      if (l.rfind("NVRM: Xid (PCI:0000:3b:00): 13, pid=2848, name=", 0) == 0) {
        // The driver's own Xid 13: it stays 13 on that GPU, whatever the name says.
        ASSERT_TRUE(x) << l;
        EXPECT_EQ(x->xid, 13) << l;
        EXPECT_EQ(x->gpu, "0000:3b:00") << l;
        ++genuine;
        continue;
      }
      EXPECT_FALSE(x) << "prio " << prio << ": " << l;
      log += std::to_string(prio) + "," + std::to_string(seq) + "," + std::to_string(seq) + ",-;" + l + "\n";
      ++seq;
    }
  }
  EXPECT_GT(genuine, 0);
  EXPECT_GT(lines.size(), 300u);
  // The whole check over all of them: nothing but "no Xid".
  XidFacts f;
  f.kmsg.log = parse_kmsg_text(log);
  f.boot_id = "b";
  ASSERT_EQ(f.kmsg.log.malformed, 0u);
  auto out = evaluate_xid(f, nullptr, {});
  EXPECT_EQ(out.result.status, Status::ok);
  EXPECT_TRUE(out.result.findings.empty()) << out.result.findings[0].message;
  EXPECT_TRUE(out.state["held"].empty());
  EXPECT_NE(out.result.summary.find("no Xid"), std::string::npos) << out.result.summary;
}

TEST(KmsgForgery, AProcessNameIsTooShortToBeTheDriversPrefixAndAnAddress) {
  // Whatever single byte the kernel prints after a 15-byte name, no Xid: the name
  // ends where the address must begin.
  for (const std::string& c : {comm(kForged), comm(kForgedOld), comm("NVRM: Xid (PCI:0000")})
    for (int b = 1; b < 256; ++b)
      for (const std::string& tail : {std::string(": 79, x"), std::string("[2848]: segfault at 0"),
                                      std::string(" invoked oom-killer"), std::string("): 79, x")})
        EXPECT_FALSE(parse_xid_message(c + static_cast<char>(b) + tail)) << c << b << tail;
}

TEST(KmsgForgery, WritesToDevKmsgAreNeverTheKernels) {
  // As this machine's kernel files them: `echo '<4>...' > /dev/kmsg` is 12 (LOG_USER,
  // warning), `<0>` is 8, no prefix is 12; a writer that names a facility gets it
  // (daemon 3*8+6 = 30, local7 23*8+3 = 187); none can name facility 0.
  for (int prio : {8, 12, 14, 30, 187, 191}) {
    KmsgRecord r{prio, 1, 1, kForged};
    EXPECT_FALSE(written_by_kernel(r)) << prio;
    EXPECT_FALSE(parse_xid_record(r)) << prio;
  }
  XidFacts f;
  f.kmsg.log = parse_kmsg_text("12,1,1,-;" + kForged + "\n8,2,2,-;" + kForged + "\n30,3,3,-;" + kForgedOld + "\n");
  f.boot_id = "b";
  EXPECT_EQ(evaluate_xid(f, nullptr, {}).result.status, Status::ok);
  // The same text from the kernel is the driver's.
  for (int prio : {0, 3, 4, 6, 7}) {
    KmsgRecord r{prio, 1, 1, kForged};
    ASSERT_TRUE(parse_xid_record(r)) << prio;
    EXPECT_EQ(parse_xid_record(r)->xid, 79);
  }
}

TEST(KmsgForgery, TheDriversFormsAreKeptWhole) {
  // The form of drivers before about 440 is not read: a 15-byte name "NVRM: Xid (0000"
  // followed by ':' would be halfway into it.
  EXPECT_FALSE(parse_xid_message(kForgedOld));
  // MIG attributes the Xid to a GPU instance (and compute instance) in the parenthesis.
  auto mig = parse_xid_message("NVRM: Xid (PCI:0000:3B:00 GPU-I:01 GPU-CI:00): 43, pid=7, name=python3, Ch 00000008");
  ASSERT_TRUE(mig);
  EXPECT_EQ(mig->gpu, "0000:3b:00");
  EXPECT_EQ(mig->xid, 43);
  EXPECT_EQ(mig->detail, "GPU-I:01 GPU-CI:00, pid=7, name=python3, Ch 00000008");
  auto gi = parse_xid_message("NVRM: Xid (PCI:0000:3b:00 GPU-I:02): 94, pid=7, name=x, Contained");
  ASSERT_TRUE(gi);
  EXPECT_EQ(gi->detail, "GPU-I:02, pid=7, name=x, Contained");
  // A PCI domain beyond 0xffff (VMD) prints wider than %04x.
  auto wide = parse_xid_message("NVRM: Xid (PCI:10000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen");
  ASSERT_TRUE(wide);
  EXPECT_EQ(wide->gpu, "10000:01:00");
  for (const char* bad :
       {" NVRM: Xid (PCI:0000:3b:00): 79, x", "x NVRM: Xid (PCI:0000:3b:00): 79, x", "NVRM: Xid (PCI:000:3b:00): 79, x",
        "NVRM: Xid (PCI:0000:3b:0): 79, x", "NVRM: Xid (PCI:0000:3b:00.0): 79, x", "NVRM: Xid (PCI:0000:3b:00 ): 79, x",
        "NVRM: Xid (PCI:0000:3b:00 GPU-I:): 79, x", "NVRM: Xid (PCI:0000:3b:00 GPU-CI:01): 79, x",
        "NVRM: Xid (PCI:0000:3b:00): 79 x", "NVRM: Xid (PCI:0000:3b:00):  79, x", "NVRM: Xid (PCI:PCI:0000:3b:00): 79",
        "NVRM: Xid (PCI:000000000:3b:00): 79, x", "NVRM: Xid (PCI:0000:3b:00): 79: x", "NVRM: Xid(PCI:0000:3b:00): 79"})
    EXPECT_FALSE(parse_xid_message(bad)) << bad;
}
