#include <gtest/gtest.h>

#include "healthcheck/checks/check_gdr.h"

using namespace gpudiag;

namespace {

constexpr const char* kProprietary550 =
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024";
constexpr const char* kOpen550 =
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  "
    "(dvs-builder@U16-I3-B03-4-3)  Tue Mar  5 22:20:20 UTC 2024";
constexpr const char* kLimits =
    "Limit                     Soft Limit           Hard Limit           Units     \n"
    "Max locked memory         %s            unlimited            bytes     \n";

std::string limits(const std::string& soft) {
  char buf[512];
  std::snprintf(buf, sizeof buf, kLimits, soft.c_str());
  return buf;
}

// 8 GPUs and 9 RDMA NICs with nvidia_peermem loaded and memlock unlimited.
GpuDirectFacts healthy() {
  GpuDirectFacts f;
  f.gpus = 8;
  f.rdma_nics = 9;
  f.peermem = true;
  f.driver_loaded = true;
  f.kernel_release = std::string("6.1.0-28-amd64");
  f.driver_version = std::string(kProprietary550);
  f.memlock = parse_memlock_limit(limits("unlimited"));
  return f;
}

GdrSettings required(const char* v) {
  GdrSettings s;
  s.required = v;
  return s;
}

}  // namespace

TEST(GpuDirectFacts, KernelRelease) {
  auto k = parse_kernel_release("6.1.0-28-amd64");
  ASSERT_TRUE(k);
  EXPECT_EQ(k->major, 6);
  EXPECT_EQ(k->minor, 1);
  EXPECT_EQ(parse_kernel_release("5.12")->minor, 12);
  EXPECT_FALSE(parse_kernel_release("linux"));
  EXPECT_FALSE(parse_kernel_release("6"));
  EXPECT_FALSE(parse_kernel_release(""));
}

TEST(GpuDirectFacts, NvidiaVersionLineProprietaryAndOpen) {
  auto p = parse_nvidia_version(std::string(kProprietary550) + "\nGCC version:  gcc version 12.2.0\n");
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->open_module);
  EXPECT_EQ(p->version, "550.54.15");
  EXPECT_EQ(p->major, 550);
  auto o = parse_nvidia_version(kOpen550);
  ASSERT_TRUE(o);
  EXPECT_TRUE(o->open_module);
  EXPECT_EQ(o->version, "550.54.15");
  // The order some releases print (nixGL issue 220).
  auto swapped = parse_nvidia_version("NVRM version: NVIDIA UNIX Open Kernel x86_64 Kernel Module  590.48.01  Mon Dec");
  ASSERT_TRUE(swapped);
  EXPECT_TRUE(swapped->open_module);
  EXPECT_EQ(swapped->major, 590);
  // Read on the H100 machine lent to this project (a VM, kernel 6.18, driver 580).
  auto lent = parse_nvidia_version(
      "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \n"
      "GCC version:  gcc version 15.3.0 (GCC) \n");
  ASSERT_TRUE(lent);
  EXPECT_TRUE(lent->open_module);
  EXPECT_EQ(lent->version, "580.159.04");
  EXPECT_EQ(parse_kernel_release("6.18.44-fc-v657-gpu")->minor, 18);
  EXPECT_FALSE(parse_nvidia_version("GCC version: 12.2.0"));
  EXPECT_FALSE(parse_nvidia_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module"));
}

TEST(GpuDirectFacts, MemlockFromProcLimits) {
  auto u = parse_memlock_limit(limits("unlimited"));
  ASSERT_TRUE(u);
  EXPECT_FALSE(u->has_value());
  auto l = parse_memlock_limit(limits("65536"));
  ASSERT_TRUE(l);
  EXPECT_EQ(**l, 65536u);
  EXPECT_FALSE(parse_memlock_limit(limits("lots")));
  EXPECT_FALSE(parse_memlock_limit("Max open files 1024 1024 files\n"));
  EXPECT_FALSE(parse_memlock_limit(""));
}

TEST(GdrCheck, PeermemLoadedIsOk) {
  auto r = evaluate_gdr(healthy(), {});
  EXPECT_EQ(r.status, Status::ok);
  EXPECT_EQ(r.summary, "GPUDirect RDMA through nvidia_peermem, memlock unlimited");
}

TEST(GdrCheck, NoPeermemAndNoDmaBufIsCriticalByDefault) {
  auto f = healthy();
  f.peermem = false;
  f.kernel_release = std::string("5.10.0-30-amd64");
  auto r = evaluate_gdr(f, {});
  EXPECT_EQ(r.status, Status::critical);
  ASSERT_TRUE(r.most_severe());
  EXPECT_EQ(r.most_severe()->message,
            "GPUDirect RDMA is unavailable: nvidia_peermem is not loaded, and dma-buf needs Linux >= 5.12 with "
            "NVIDIA's open kernel module >= 515 (this node: Linux 5.10 with the proprietary kernel module "
            "550.54.15)");
  EXPECT_NE(r.most_severe()->hint.find("modprobe nvidia_peermem"), std::string::npos);
  EXPECT_EQ(evaluate_gdr(f, required("true")).status, Status::critical);
  EXPECT_EQ(evaluate_gdr(f, required("false")).status, Status::warning);
}

TEST(GdrCheck, EachDmaBufConditionMatters) {
  auto f = healthy();
  f.peermem = false;
  f.driver_version = std::string(kOpen550);
  auto ok = evaluate_gdr(f, {});
  EXPECT_EQ(ok.status, Status::ok);
  EXPECT_EQ(ok.summary, "GPUDirect RDMA through dma-buf, memlock unlimited");
  EXPECT_NE(ok.findings[0].message.find("Linux 6.1, open kernel module 550.54.15"), std::string::npos);

  auto old_kernel = f;
  old_kernel.kernel_release = std::string("5.11.22");
  EXPECT_EQ(evaluate_gdr(old_kernel, {}).status, Status::critical);
  auto old_driver = f;
  old_driver.driver_version =
      std::string("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  510.47.03  Release Build");
  EXPECT_EQ(evaluate_gdr(old_driver, {}).status, Status::critical);
  auto proprietary = f;
  proprietary.driver_version = std::string(kProprietary550);
  EXPECT_EQ(evaluate_gdr(proprietary, {}).status, Status::critical);
}

TEST(GdrCheck, DriverNotLoadedIsMissing) {
  auto f = healthy();
  f.peermem = false;
  f.driver_loaded = false;
  f.driver_version = Result<std::string>::failure("/proc/driver/nvidia/version: No such file or directory");
  auto r = evaluate_gdr(f, {});
  EXPECT_EQ(r.status, Status::critical);
  EXPECT_NE(r.most_severe()->message.find("neither is the NVIDIA driver"), std::string::npos);
}

TEST(GdrCheck, GarbageIsUnknownNeverOk) {
  auto f = healthy();
  f.peermem = false;
  f.driver_version = std::string(kOpen550);
  f.kernel_release = Result<std::string>::failure("/proc/sys/kernel/osrelease: holds binary data, not text");
  auto r = evaluate_gdr(f, {});
  EXPECT_EQ(r.status, Status::unknown);
  EXPECT_NE(r.most_severe()->message.find("osrelease"), std::string::npos);
  f.kernel_release = std::string("6.1.0");
  f.driver_version = std::string("NVRM version: garbage");
  EXPECT_EQ(evaluate_gdr(f, {}).status, Status::unknown);
  // A kernel too old for dma-buf decides it whatever the driver says.
  f.kernel_release = std::string("5.4.0-150-generic");
  EXPECT_EQ(evaluate_gdr(f, {}).status, Status::critical);

  auto m = healthy();
  m.memlock = parse_memlock_limit("Max locked memory  \x01\x02 bytes\n");
  EXPECT_EQ(evaluate_gdr(m, {}).status, Status::unknown);
}

TEST(GdrCheck, LimitedMemlockIsAWarningWithTheFix) {
  auto f = healthy();
  f.memlock = parse_memlock_limit(limits("65536"));
  auto r = evaluate_gdr(f, {});
  EXPECT_EQ(r.status, Status::warning);
  EXPECT_EQ(r.most_severe()->subject, "memlock");
  EXPECT_NE(r.most_severe()->message.find("64 KiB"), std::string::npos);
  EXPECT_NE(r.most_severe()->hint.find("memlock unlimited"), std::string::npos);
  EXPECT_NE(r.most_severe()->hint.find("LimitMEMLOCK=infinity"), std::string::npos);
}

TEST(GdrCheck, NotApplicableWithoutGpusOrRdmaNics) {
  auto f = healthy();
  f.peermem = false;
  f.rdma_nics = 0;
  auto r = evaluate_gdr(f, required("true"));
  EXPECT_EQ(r.status, Status::ok);
  EXPECT_EQ(r.summary, "not applicable (no RDMA NIC)");
  f.rdma_nics = 2;
  f.gpus = 0;
  EXPECT_EQ(evaluate_gdr(f, {}).summary, "not applicable (no NVIDIA GPU)");
}

// AWS p5 on Amazon Linux 2: no nvidia_peermem, kernel 5.10 (no dma-buf), proprietary 535;
// every RDMA NIC is EFA and the out-of-tree efa driver maps GPU memory itself.
namespace {
GpuDirectFacts efa_node() {
  GpuDirectFacts f = healthy();
  f.rdma_nics = 32;
  f.efa_nics = 32;
  f.peermem = false;
  f.kernel_release = std::string("5.10.219-208.866.amzn2.x86_64");
  f.driver_version = std::string(
      "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024");
  f.efa_version = std::string("2.10.0g");
  f.efa_gdr_on = 32;
  return f;
}
}  // namespace

TEST(GdrCheck, EfaDriversOwnPeerMemoryPathIsGpuDirect) {
  auto r = evaluate_gdr(efa_node(), required("auto"));
  EXPECT_EQ(r.status, Status::ok) << r.findings[0].message;
  EXPECT_EQ(r.summary, "GPUDirect RDMA through the efa driver, memlock unlimited");
  EXPECT_NE(r.findings[0].message.find("efa 2.10.0g, gdr 1 on 32 device(s)"), std::string::npos);
}

// Older GDR builds have no gdr file: the "g" in the module version says it.
TEST(GdrCheck, EfaGdrBuildWithoutGdrFile) {
  auto f = efa_node();
  f.efa_gdr_on = 0;
  EXPECT_EQ(evaluate_gdr(f, required("auto")).status, Status::ok);
  f.efa_version = std::string("2.10.0");
  EXPECT_EQ(evaluate_gdr(f, required("auto")).status, Status::critical);
}

TEST(GdrCheck, EfaThatFoundNoNvidiaSymbolsIsNamed) {
  auto f = efa_node();
  f.efa_gdr_on = 0;
  f.efa_gdr_off = 32;
  auto r = evaluate_gdr(f, required("auto"));
  EXPECT_EQ(r.status, Status::critical);
  EXPECT_NE(r.findings[0].message.find("the efa driver 2.10.0g reports gdr 0 on 32 of 32 device(s)"),
            std::string::npos)
      << r.findings[0].message;
  EXPECT_NE(r.findings[0].hint.find("/sys/module/efa/version"), std::string::npos);
}

// An efa path helps EFA devices only: a node with mlx5 NICs beside them still needs its own.
TEST(GdrCheck, EfaPathDoesNotCoverOtherNics) {
  auto f = efa_node();
  f.rdma_nics = 33;
  EXPECT_EQ(evaluate_gdr(f, required("auto")).status, Status::critical);
}
