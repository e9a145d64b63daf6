// The kmsg record and Xid parsers, the catalogue, and the xid check's judgement.
#include <gtest/gtest.h>

#include "config/config_file.h"
#include "healthcheck/checks/check_xid.h"
#include "healthcheck/checks/xid_catalogue.h"
#include "nodeinfo/kmsg.h"
#include "tests/unit/healthcheck/checks/finding.h"

using namespace gpudiag;
using gpudiag::test::find;

namespace {

const std::string kBoot = "0b4f1c8e-3a52-4d8e-9b1e-6f0e2d7c9a11";

XidFacts facts(const std::string& kmsg_text, const std::string& boot = kBoot) {
  XidFacts f;
  f.kmsg.log = parse_kmsg_text(kmsg_text);
  f.boot_id = boot;
  return f;
}

const char* kXid79 =
    "6,10,5010000,-;usb 1-1: new high-speed USB device number 2 using xhci_hcd\n"
    "4,11,5011000,-;NVRM: Xid (PCI:0000:94:00): 79, pid=41222, name=python3, GPU has fallen off the bus.\n"
    "3,12,5012000,-;NVRM: GPU 0000:94:00.0: GPU has fallen off the bus.\n"
    " SUBSYSTEM=pci\n"
    " DEVICE=+pci:0000:94:00.0\n";

}  // namespace

TEST(KmsgRecord, ParsesTheKernelsFormat) {
  auto r = parse_kmsg_record("4,11,5011000,-;NVRM: Xid (PCI:0000:94:00): 79, GPU has fallen off the bus.");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->priority, 4);
  EXPECT_EQ(r->seq, 11u);
  EXPECT_EQ(r->usec, 5011000u);
  EXPECT_EQ(r->message, "NVRM: Xid (PCI:0000:94:00): 79, GPU has fallen off the bus.");
  // Kernels with CONFIG_PRINTK_CALLER add a field; a message may hold ';' itself.
  auto c = parse_kmsg_record("6,339,5140900,-,caller=T1;a;b");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->seq, 339u);
  EXPECT_EQ(c->message, "a;b");
}

TEST(KmsgRecord, RejectsHalfRecordsAndJunk) {
  for (const char* bad : {"", "6,17", "6,17,5000;", "x,19,5019000,-;not a priority", " SUBSYSTEM=pci", ";;;,,,",
                          "-1,2,3,-;negative", "6,,3,-;empty seq", "6,2,3,;no flags", "\xff\xfe;x",
                          "6,99999999999999999999999,3,-;overflow"})
    EXPECT_FALSE(parse_kmsg_record(bad)) << bad;
}

TEST(KmsgText, SkipsContinuationLinesAndCountsJunk) {
  auto log = parse_kmsg_text(std::string(kXid79) + "junk\n\xff\xfe\n6,13,5013000,-;last\n");
  ASSERT_EQ(log.records.size(), 4u);
  EXPECT_EQ(log.records.back().message, "last");
  EXPECT_EQ(log.malformed, 2u);
  EXPECT_FALSE(log.overwritten);
  EXPECT_TRUE(parse_kmsg_text("6,1,1,-;a\n6,5,2,-;b\n").overwritten);
}

TEST(XidMessage, TheDriversForm) {
  auto e = parse_xid_message("NVRM: Xid (PCI:0000:94:00): 79, pid=41222, name=python3, GPU has fallen off the bus.");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->gpu, "0000:94:00");
  EXPECT_EQ(e->xid, 79);
  EXPECT_EQ(e->detail, "pid=41222, name=python3, GPU has fallen off the bus.");
  auto bare = parse_xid_message("NVRM: Xid (PCI:0000:2B:00): 79, GPU has fallen off the bus.");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->gpu, "0000:2b:00");
  auto end = parse_xid_message("NVRM: Xid (PCI:0000:2b:00): 154");
  ASSERT_TRUE(end);
  EXPECT_EQ(end->xid, 154);
  EXPECT_EQ(end->detail, "");
}

TEST(XidMessage, NotAnXid) {
  for (const char* bad : {"NVRM: GPU 0000:94:00.0: GPU has fallen off the bus.", "NVRM: Xid (PCI:0000:94",
                          "NVRM: Xid (PCI:0000:94:00): abc, x", "NVRM: Xid (PCI:0000:94:00): 79x, x",
                          "NVRM: Xid (PCI:zz:94:00): 79, x", "NVRM: Xid (): 79, x", "NVRM: Xid (PCI:0000:94:00): 123456, x"})
    EXPECT_FALSE(parse_xid_message(bad)) << bad;
}

TEST(XidCatalogue, ClassesFollowNvidiasResolutionBuckets) {
  for (int x : {48, 64, 74, 79, 92, 94, 95, 119, 120, 140}) {
    auto i = find_xid(x);
    ASSERT_TRUE(i) << x;
    EXPECT_EQ(i->cls, XidClass::hardware) << x;
    EXPECT_NE(std::string(i->fix), "") << x;
  }
  for (int x : {13, 31, 43, 45}) EXPECT_EQ(find_xid(x)->cls, XidClass::application) << x;
  EXPECT_EQ(find_xid(63)->cls, XidClass::attention);
  EXPECT_FALSE(find_xid(9999));
}

TEST(EvaluateXid, EmptyLogIsOk) {
  auto out = evaluate_xid(facts(""), nullptr, {});
  EXPECT_EQ(out.result.status, Status::ok);
  EXPECT_NE(out.result.summary.find("no Xid since boot"), std::string::npos) << out.result.summary;
  EXPECT_EQ(out.state["boot_id"], kBoot);
}

TEST(EvaluateXid, FallenOffTheBusIsCriticalAndNamesTheGpuMeaningAndFix) {
  auto out = evaluate_xid(facts(kXid79), nullptr, {});
  EXPECT_EQ(out.result.status, Status::critical);
  const Finding* f = find(out.result, "0000:94:00");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->status, Status::critical);
  EXPECT_NE(f->message.find("GPU 0000:94:00: Xid 79, GPU has fallen off the bus"), std::string::npos) << f->message;
  EXPECT_NE(f->hint.find("reboot"), std::string::npos);
  EXPECT_EQ(out.state["last_seq"], 12);
  ASSERT_EQ(out.result.metrics.size(), 1u);
  EXPECT_EQ(out.result.metrics[0].name, "gpudiag_xid_events");
  EXPECT_EQ(out.result.metrics[0].value, 1);
}

TEST(EvaluateXid, ApplicationFaultsAreOnlyNoted) {
  auto out = evaluate_xid(facts("4,1,1,-;NVRM: Xid (PCI:0000:33:00): 13, pid=7, name=python3, Graphics Exception\n"
                                "4,2,2,-;NVRM: Xid (PCI:0000:33:00): 43, pid=7, name=python3, Ch 00000008\n"
                                "4,3,3,-;NVRM: Xid (PCI:0000:33:00): 43, pid=8, name=python3, Ch 00000009\n"),
                          nullptr, {});
  EXPECT_EQ(out.result.status, Status::ok);
  ASSERT_EQ(out.result.findings.size(), 2u);
  EXPECT_NE(out.result.findings[1].message.find("Xid 43"), std::string::npos);
  EXPECT_NE(out.result.findings[1].message.find("(2 times)"), std::string::npos);
  EXPECT_NE(out.result.findings[0].hint.find("job's own fault"), std::string::npos);
}

TEST(EvaluateXid, UnknownXidIsAWarningThatSaysWhereToLook) {
  auto out = evaluate_xid(facts("4,1,1,-;NVRM: Xid (PCI:0000:33:00): 999, something new\n"), nullptr, {});
  EXPECT_EQ(out.result.status, Status::warning);
  EXPECT_NE(out.result.findings[0].hint.find("xid-errors"), std::string::npos);
}

TEST(EvaluateXid, ConfigOverridesTheCatalogue) {
  XidSettings cfg;
  cfg.ignore = {79};
  cfg.critical = {13};
  auto out = evaluate_xid(
      facts(std::string(kXid79) + "4,13,1,-;NVRM: Xid (PCI:0000:33:00): 13, pid=7, name=python3, Graphics\n"), nullptr,
      cfg);
  EXPECT_EQ(find(out.result, "0000:94:00")->status, Status::ok);
  EXPECT_NE(find(out.result, "0000:94:00")->message.find("ignored by xid.ignore"), std::string::npos);
  EXPECT_EQ(find(out.result, "0000:33:00")->status, Status::critical);
}

TEST(EvaluateXid, OnlySinceTheLastRunOnTheSameBoot) {
  nlohmann::json prev = {{"boot_id", kBoot}, {"last_seq", 12}};
  auto out = evaluate_xid(facts(kXid79), prev, {});
  EXPECT_EQ(out.result.status, Status::ok);
  EXPECT_NE(out.result.summary.find("since the last run"), std::string::npos);
  EXPECT_EQ(out.state["last_seq"], 12);
  prev["last_seq"] = 10;
  EXPECT_EQ(evaluate_xid(facts(kXid79), prev, {}).result.status, Status::critical);
  // A reboot starts over, whatever the sequence numbers.
  prev = {{"boot_id", "another-boot"}, {"last_seq", 100}};
  auto rebooted = evaluate_xid(facts(kXid79), prev, {});
  EXPECT_EQ(rebooted.result.status, Status::critical);
  EXPECT_NE(rebooted.result.summary.find("rebooted"), std::string::npos);
  // Records between the runs were overwritten: said, not hidden.
  auto wrapped = evaluate_xid(facts(kXid79), {{"boot_id", kBoot}, {"last_seq", 3}}, {});
  ASSERT_NE(find(wrapped.result, "kmsg"), nullptr);
  EXPECT_NE(find(wrapped.result, "kmsg")->hint.find("log_buf_len"), std::string::npos);
  // Garbage state is as good as none.
  EXPECT_EQ(evaluate_xid(facts(kXid79), {{"boot_id", 5}, {"last_seq", "x"}}, {}).result.status, Status::critical);
}

TEST(EvaluateXid, AHardwareXidIsHeldUntilTheNodeReboots) {
  XidFacts f = facts(kXid79);
  f.state_path = "/var/lib/gpudiag/n.json";
  auto first = evaluate_xid(f, nullptr, {});
  ASSERT_EQ(first.state["held"].size(), 1u);
  // No new record, but the GPU has not been reset: still CRITICAL, so --resume keeps
  // the node drained.
  auto second = evaluate_xid(f, first.state, {});
  EXPECT_EQ(second.result.status, Status::critical);
  const Finding* h = find(second.result, "0000:94:00");
  ASSERT_NE(h, nullptr);
  EXPECT_NE(h->message.find("held until the node reboots"), std::string::npos) << h->message;
  EXPECT_NE(h->hint.find("remove /var/lib/gpudiag/n.json"), std::string::npos) << h->hint;
  EXPECT_NE(second.result.summary.find("no Xid since the last run; 1 earlier one(s) held until reboot"),
            std::string::npos)
      << second.result.summary;
  // A reboot releases it (this log is the old boot's, so 79 shows as new again).
  auto other_boot = facts("6,1,1,-;booted again\n", "new-boot");
  EXPECT_EQ(evaluate_xid(other_boot, second.state, {}).result.status, Status::ok);
  // Application faults and ignored Xids are never held.
  XidSettings ignore79;
  ignore79.ignore = {79};
  EXPECT_TRUE(evaluate_xid(f, nullptr, ignore79).state["held"].empty());
  // Garbage in the held list is skipped.
  nlohmann::json junk = {{"boot_id", kBoot}, {"last_seq", 12}, {"held", {1, {{"gpu", 5}}, {{"gpu", "x"}, {"xid", 48}, {"count", "many"}}}}};
  auto j = evaluate_xid(f, junk, {});
  EXPECT_EQ(j.result.status, Status::critical);
  EXPECT_NE(find(j.result, "x"), nullptr);
}

TEST(EvaluateXid, UnreadableLogIsUnknownWithTheFix) {
  XidFacts f;
  f.kmsg.error = "cannot open /dev/kmsg: Operation not permitted";
  f.kmsg.denied = true;
  auto out = evaluate_xid(f, nullptr, {});
  EXPECT_EQ(out.result.status, Status::unknown);
  EXPECT_NE(out.result.findings[0].hint.find("dmesg_restrict"), std::string::npos);
  EXPECT_TRUE(out.state.is_null());
  f.kmsg.denied = false;
  f.kmsg.error = "/dev/kmsg: No such file or directory";
  EXPECT_NE(evaluate_xid(f, nullptr, {}).result.findings[0].hint.find("regular file"), std::string::npos);
}

TEST(EvaluateXid, JunkOnlyIsUnknownJunkAmongRecordsIsANote) {
  EXPECT_EQ(evaluate_xid(facts("\xff\xfe\x01\njunk\n"), nullptr, {}).result.status, Status::unknown);
  auto out = evaluate_xid(facts(std::string("junk\n") + kXid79), nullptr, {});
  EXPECT_EQ(out.result.status, Status::critical);
  EXPECT_NE(find(out.result, "kmsg"), nullptr);
}

TEST(XidConfig, OverridesAreStrictlyValidated) {
  auto ok = parse_config("xid:\n  critical: [13]\n  ignore: [63, 92]\n", "t.yaml");
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_EQ(ok->xid.critical, std::vector<int>({13}));
  EXPECT_EQ(ok->xid.ignore, std::vector<int>({63, 92}));
  for (const char* bad : {"xid:\n  critical: 13\n", "xid:\n  critical: [abc]\n", "xid:\n  fatal: [13]\n",
                          "xid:\n  critical: [79]\n  ignore: [79]\n", "xid: [79]\n"}) {
    auto r = parse_config(bad, "t.yaml");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().rfind("gpudiag: t.yaml:", 0), 0u) << r.error();
  }
  auto state = parse_config("health:\n  state_dir: /var/tmp/gd\n", "t.yaml");
  ASSERT_TRUE(state);
  EXPECT_EQ(state->health.state_dir, "/var/tmp/gd");
  EXPECT_FALSE(parse_config("health:\n  state_dir: relative\n", "t.yaml"));
}
