#pragma once
// What gpudiag-health does about this node in Slurm after the checks (--drain,
// --resume), with the drain breaker in front of every drain of a node in service
// (ARCHITECTURE §4). Slurm is reached through SlurmPort so that the sequence (count,
// drain, re-count, undo, retry) can be tested against a scripted Slurm.
#include <string>
#include <vector>

#include "config/config.h"
#include "healthcheck/drain/drain_breaker.h"
#include "healthcheck/drain/slurm_node.h"
#include "healthcheck/report/report.h"

namespace gpudiag {

// Exit code of a CRITICAL node the breaker held back (cap reached, or gpudiag could
// not count): the hooks log it and leave the node in service. 0-3 keep their Nagios
// meaning; Nagios itself reads 4 as UNKNOWN.
constexpr int kExitHeldBack = 4;

class SlurmPort {
 public:
  virtual ~SlurmPort() = default;
  virtual Result<SlurmNodeState> show(const std::string& node) = 0;
  virtual Result<std::vector<SlurmNodeRecord>> show_all() = 0;
  virtual Result<bool> drain(const std::string& node, const std::string& reason) = 0;
  virtual Result<bool> resume(const std::string& node) = 0;
  virtual Result<bool> undrain(const std::string& node) = 0;
  virtual void sleep(double seconds) = 0;
  virtual double random_unit() = 0;  // uniform in [0, 1)
  virtual void syslog(const std::string& line) = 0;
};

// scontrol (health.scontrol_timeout per call), a real clock, and `logger -t gpudiag`
// (to $GPUDIAG_SYSLOG_SOCKET when set, as the hook scripts do), each without a shell.
class RealSlurm : public SlurmPort {
 public:
  explicit RealSlurm(double scontrol_timeout_s);
  Result<SlurmNodeState> show(const std::string& node) override;
  Result<std::vector<SlurmNodeRecord>> show_all() override;
  Result<bool> drain(const std::string& node, const std::string& reason) override;
  Result<bool> resume(const std::string& node) override;
  Result<bool> undrain(const std::string& node) override;
  void sleep(double seconds) override;
  double random_unit() override;
  void syslog(const std::string& line) override;

 private:
  Scontrol sc_;
  unsigned long long seed_;
};

struct ActOptions {
  bool drain = false, resume = false;
  bool force = false;  // --drain --force: drain without asking the breaker
};

// A try slot after an undone drain, and the longest wait for one (ARCHITECTURE §4).
constexpr double kRetrySlotS = 1.0;
constexpr int kMaxTries = 3;
constexpr double kMaxRetryWaitS = 5.0;

struct ActResult {
  SlurmOutcome outcome;
  std::string error;  // a failure to report on stderr (exit 3), or ""
};

ActResult act_on_node(const Report& report, const Config& cfg, const std::string& node, const ActOptions& opts,
                      SlurmPort& slurm);

}  // namespace gpudiag
