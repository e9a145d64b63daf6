#pragma once
// The fabric test's verdict (issue 32): findings from every part, at most five lines for
// srun's stderr naming the node or link and the fix, and fabric.json. Pure.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fabric/node_differs.h"
#include "fabric/pair_verdict.h"

namespace gpudiag::fabric {

inline constexpr std::size_t kMaxVerdictLines = 5;

struct NodeEntry {
  std::string name;
  std::string addr;  // the listener, as the node reported it
  int port = 0;
};

// What one directed test did, as recorded.
struct TestRecord {
  int from = 0, to = 0;
  bool reach = false;
  int round = 0;  // 0: the reach check; 1..: pair rounds (re-tests after the first ones)
  std::string transport = "tcp";  // "tcp" or "rdma"
  bool retest = false;
  std::uint64_t bytes = 0, usec = 0;
  std::string error;
  std::optional<double> gbps() const;  // none on error or without time
};

// The tests over one transport.
std::vector<Measurement> measurements(const std::vector<TestRecord>& tests, const std::string& transport = "tcp");

// Unreachable ports and directions, slow nodes and links, from the pair tests over
// `transport` (`j` judged them).
std::vector<Finding> pair_findings(const std::vector<NodeEntry>& nodes, const std::vector<TestRecord>& tests,
                                   const PairJudgement& j, int rendezvous_port, const std::string& transport = "tcp");

// The RDMA part: which port each node tested with, or why it has none.
struct RdmaSummary {
  std::vector<std::string> hca;   // per node id: "mlx5_0:1", "" for none
  std::vector<std::string> none;  // per node id: why none
  bool tested = false;            // at least one pair ran
  PairJudgement judgement;
};
// A note when some nodes have RDMA and others not, or a node's RDMA could not start.
std::vector<Finding> rdma_findings(const std::vector<NodeEntry>& nodes, const RdmaSummary& r);

// The admin's command for the nodes slow with every partner ("to drain (...): scontrol
// update NodeName=n3 State=DRAIN Reason=..."); only host-name characters ever reach it.
std::string drain_command(const std::vector<std::string>& nodes);

struct FabricVerdict {
  bool start = true;
  std::vector<std::string> lines;  // each starts "gpudiag: fabric: ", at most kMaxVerdictLines
};
// `fail_action`: fabric.action is fail. `report_path`: where fabric.json is ("" if none).
FabricVerdict fabric_verdict(const std::vector<Finding>& findings, bool fail_action, const PairJudgement& j,
                             std::size_t node_count, const std::string& report_path, const RdmaSummary* rdma = nullptr,
                             const PairJudgement* nccl = nullptr);

struct FabricReport {
  std::string job_step;  // "JOB.STEP"
  std::vector<NodeEntry> nodes;
  std::vector<TestRecord> tests;
  PairJudgement judgement;  // TCP
  RdmaSummary rdma;
  PairJudgement nccl_judgement;  // NCCL all_reduce pairs: both ranks' bus bandwidth
  bool nccl_tested = false;
  std::map<std::string, std::string> nccl_none;  // node -> why it ran no NCCL pair
  std::vector<Finding> findings;
  FabricVerdict verdict;
  int rounds = 0;
  double seconds = 0;  // the whole test, as srun saw it
};
std::string fabric_json(const FabricReport& r);

}  // namespace gpudiag::fabric
