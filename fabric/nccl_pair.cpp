#include "fabric/nccl_pair.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <nlohmann/json.hpp>

#include "fabric/fabric_wire.h"
#include "probe/probe_json.h"
#include "util/control_bytes.h"
#include "util/spawn_child.h"

namespace gpudiag::fabric {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kProbeLineMax = 4096;
constexpr const char* kBytes = "8M";  // per rank: a pair's figure in well under a second on a real link
constexpr int kIters = 5, kWarmup = 1;

bool hex_id(const std::string& s) {
  return s.size() == kNcclIdHex &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

std::string nccl_probe_path(const std::string& configured, std::string& why) {
  const std::string path =
      configured.empty() ? std::string(GPUDIAG_LIBEXEC_DIR) + "/gpudiag/gpudiag-gpu-probe" : configured;
  if (::access(path.c_str(), X_OK) == 0) return path;
  why = "no GPU probe at " + path;
  return "";
}

std::optional<ProbeLine> parse_probe_line(const std::string& line) {
  if (line.size() >= kProbeLineMax) return std::nullopt;
  try {
    const auto j = nlohmann::json::parse(line);
    if (!j.is_object()) return std::nullopt;
    ProbeLine out;
    if (j.contains("id")) {
      if (!j["id"].is_string() || !hex_id(j["id"].get<std::string>())) return std::nullopt;
      out.id = j["id"].get<std::string>();
      return out;
    }
    if (j.contains("error")) {
      const auto& e = j["error"];
      std::string m = e.is_object() && e.contains("message") && e["message"].is_string()
                          ? e["message"].get<std::string>()
                          : "the probe failed";
      m = escape_control(m);
      out.error = m.substr(0, 300);
      return out;
    }
    if (!j.contains("bytes") || !j.contains("usec") || !j["bytes"].is_number_unsigned() ||
        !j["usec"].is_number_unsigned())
      return std::nullopt;
    out.bytes = j["bytes"].get<std::uint64_t>();
    out.usec = j["usec"].get<std::uint64_t>();
    if (*out.usec == 0 || *out.bytes > (1ull << 50) || *out.usec > (1ull << 40)) return std::nullopt;
    return out;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

NcclPairResult run_nccl_pair(const NcclProbe& p, int rank, const std::string& id, double deadline_s,
                             const std::function<bool(const std::string&)>& on_id) {
  NcclPairResult out;
  std::vector<std::string> argv = {p.probe};
  if (!p.cuda_library.empty()) argv.insert(argv.end(), {"--cuda", p.cuda_library});
  if (!p.nccl_library.empty()) argv.insert(argv.end(), {"--nccl", p.nccl_library});
  argv.insert(argv.end(), {"--wait-limit", std::to_string(static_cast<int>(deadline_s)), "pair", "--rank",
                           std::to_string(rank), "--bytes", kBytes, "--iters", std::to_string(kIters), "--warmup",
                           std::to_string(kWarmup)});
  // The id holds rank 0's bootstrap address and magic: in the environment, which only its
  // owner reads, never on the command line, which every user on the node can.
  std::vector<std::string> env;
  if (rank == 1) env.push_back(std::string(probe_json::kNcclPairIdEnv) + "=" + id);
  SpawnedChild c = spawn_child(argv, nullptr, env);
  if (!c.started()) {
    out.error = "cannot start the GPU probe: " + c.error;
    return out;
  }
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(deadline_s));
  std::string buf;
  bool done = false;
  while (!done) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    if (left <= 0) {
      out.error = "the GPU probe gave no result within " + std::to_string(static_cast<int>(deadline_s)) + " s";
      break;
    }
    // Its stderr (NCCL's and the driver's chatter) is read and dropped: a full pipe would stop it.
    pollfd pf[2] = {{c.out, POLLIN, 0}, {c.err, POLLIN, 0}};
    int rc = ::poll(pf, c.err >= 0 ? 2 : 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (rc <= 0) continue;
    char chunk[1024];
    if (c.err >= 0 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      if (::read(c.err, chunk, sizeof chunk) <= 0) {
        ::close(c.err);
        c.err = -1;
      }
    }
    if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    ssize_t n = ::read(c.out, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      out.error = "the GPU probe ended without a result";
      break;
    }
    buf.append(chunk, static_cast<std::size_t>(n));
    for (auto nl = buf.find('\n'); nl != std::string::npos && !done; nl = buf.find('\n')) {
      auto line = parse_probe_line(buf.substr(0, nl));
      buf.erase(0, nl + 1);
      if (!line) {
        out.error = "the GPU probe said something else than a result";
        done = true;
      } else if (!line->id.empty()) {
        if (rank != 0 || !on_id(line->id)) done = true;
      } else if (!line->error.empty()) {
        out.error = line->error;
        done = true;
      } else {
        out.bytes = *line->bytes;
        out.usec = *line->usec;
        done = true;
      }
    }
    if (buf.size() >= kProbeLineMax) {
      out.error = "the GPU probe said too much";
      break;
    }
  }
  // Ours to end: its own session, so the whole group.
  ::kill(-c.pid, SIGKILL);
  ::kill(c.pid, SIGKILL);
  while (::waitpid(c.pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  ::close(c.out);
  if (c.err >= 0) ::close(c.err);
  if (out.error.empty() && out.usec == 0) out.error = "no result";
  return out;
}

}  // namespace gpudiag::fabric
