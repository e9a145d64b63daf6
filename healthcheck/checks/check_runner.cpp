#include "healthcheck/checks/check_runner.h"

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "healthcheck/checks/check_acs.h"
#include "healthcheck/checks/check_gpu.h"
#include "healthcheck/checks/check_ib.h"
#include "healthcheck/checks/check_iommu.h"
#include "healthcheck/checks/check_nccl.h"
#include "healthcheck/checks/check_p2p.h"
#include "healthcheck/checks/check_ibcounters.h"
#include "healthcheck/checks/check_xid.h"
#include "healthcheck/checks/check_pcie.h"
#include "healthcheck/checks/check_gdr.h"

namespace gpudiag {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

CheckResult not_available(const std::string& name) {
  CheckResult r;
  r.name = name;
  r.add({name, Status::unknown, "the " + name + " check is not available in this build yet",
         "run the checks that need no GPU with --quick"});
  r.summary = "not available";
  return r;
}

CheckResult run_one(const std::string& name, const CheckContext& ctx, const CheckTable& table) {
  try {
    auto it = table.find(name);
    return it == table.end() ? not_available(name) : it->second(ctx);
  } catch (const std::exception& e) {
    CheckResult r;
    r.name = name;
    r.add({name, Status::unknown, fmt::format("the {} check failed: {}", name, e.what()),
           "this is a gpudiag bug: please report it with the output of --verbose"});
    return r;
  }
}

// Shared with the worker thread, which may outlive run_checks on a timeout.
struct Shared {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<CheckResult> done;
  bool finished = false;
};

}  // namespace

const CheckTable& builtin_checks() {
  static const CheckTable kTable = {
      {"ib", run_ib_check}, {"acs", run_acs_check}, {"iommu", run_iommu_check}, {"gpu", run_gpu_check},
      {"p2p", run_p2p_check}, {"nccl", run_nccl_check},
      {"xid", run_xid_check}, {"ibcounters", run_ibcounters_check},
      {"pcie", run_pcie_check}, {"gdr", run_gdr_check}};
  return kTable;
}

RunOutcome run_checks(const CheckContext& ctx, const RunOptions& opts, const std::string& node,
                      const CheckTable& table) {
  RunOutcome out;
  out.report.node = node;
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opts.timeout_s));

  CheckContext timed = ctx;
  timed.deadline = deadline;
  auto shared = std::make_shared<Shared>();
  // The table is copied: after a timeout the worker outlives this call.
  // The context is copied too (it holds references to what the caller keeps alive
  // until exit, which is how an abandoned worker is handled).
  std::thread worker([shared, timed, checks = opts.checks, table] {
    for (const auto& name : checks) {
      auto c0 = Clock::now();
      CheckResult r = run_one(name, timed, table);
      r.name = name;
      r.duration_ms = ms_since(c0);
      std::lock_guard lock(shared->mu);
      shared->done.push_back(std::move(r));
      shared->cv.notify_all();
    }
    std::lock_guard lock(shared->mu);
    shared->finished = true;
    shared->cv.notify_all();
  });

  std::unique_lock lock(shared->mu);
  const bool in_time = shared->cv.wait_until(lock, deadline, [&] { return shared->finished; });
  std::vector<CheckResult> done = shared->done;
  lock.unlock();

  for (auto& r : done) out.report.add(std::move(r));
  if (in_time) {
    worker.join();
  } else {
    worker.detach();
    out.abandoned_thread = true;
    for (std::size_t i = done.size(); i < opts.checks.size(); ++i) {
      CheckResult r;
      r.name = opts.checks[i];
      if (i == done.size()) {
        r.add({r.name, Status::critical, fmt::format("the {} check timed out after {:g} s", r.name, opts.timeout_s),
               "something on this node hangs (a wedged device or a hung file system): look at `dmesg`; raise "
               "--timeout only if the node is known to be slow"});
        r.summary = "timed out";
      } else {
        r.add({r.name, Status::unknown, "not run: the time budget ran out", ""});
        r.summary = "not run";
      }
      out.report.add(std::move(r));
    }
  }
  out.report.duration_ms = ms_since(t0);
  out.report.finished_at_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return out;
}

}  // namespace gpudiag
