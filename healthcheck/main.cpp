// gpudiag-health: node health checks for GPU training nodes (ARCHITECTURE §8).
// Exit codes follow the Nagios plugin convention: 0 OK, 1 WARNING, 2 CRITICAL,
// 3 UNKNOWN (bad usage, bad config, a check that could not run); and 4: CRITICAL, but
// the drain breaker held --drain back (healthcheck/drain/slurm_action.h).
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "healthcheck/baseline/baseline_config.h"
#include "healthcheck/checks/check_runner.h"
#include "healthcheck/drain/drain_policy.h"
#include "healthcheck/report/formats.h"
#include "healthcheck/state/run_state.h"
#include "healthcheck/drain/slurm_action.h"
#include "healthcheck/drain/slurm_node.h"
#include "config/config.h"
#include "config/config_file.h"
#include "util/control_bytes.h"
#include "util/private_file.h"
#include "util/text_lists.h"
#include "util/this_host.h"

namespace {

constexpr int kExitUnknown = 3;

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "%s\n", msg.c_str());
  return kExitUnknown;
}

void write_all(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

// For an admin on a drained node: what Slurm says and how to clear it.
std::string slurm_note(const gpudiag::Config& cfg, const std::string& node) {
  gpudiag::Scontrol sc(cfg.health.scontrol_timeout_s);
  auto st = sc.show(node);
  if (!st) return "";  // no Slurm here, or not reachable: nothing to add
  auto standing = gpudiag::node_standing(*st, cfg.health.drain_prefix);
  if (standing.kind == gpudiag::NodeStanding::drained_by_us)
    return fmt::format("Slurm: {} is drained by gpudiag: \"{}\"\n  Once the node is healthy, `gpudiag-health --resume` "
                       "resumes it.\n",
                       node, st->reason);
  if (standing.kind == gpudiag::NodeStanding::not_ours)
    return fmt::format("Slurm: {}: {}: --drain and --resume will leave it as it is.\n", node, standing.why);
  return fmt::format("Slurm: {} is {}.\n", node, st->state);
}

// --baseline: the config of what this node has on stdout. A node that looks sick still
// gets one, but exit 1 and a warning keep anybody from copying it unawares.
int print_baseline(const gpudiag::CheckContext& ctx) {
  auto facts = gpudiag::gather_baseline_facts(ctx);
  auto baseline = gpudiag::derive_baseline(facts, ctx.cfg);
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  char date[32] = "an unknown date";
  if (::gmtime_r(&now, &tm)) std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", &tm);
  write_all(gpudiag::baseline_yaml(baseline, facts, ctx.cfg, date));
  if (baseline.doubts.empty()) return 0;
  std::string list;
  for (const auto& d : baseline.doubts) list += "\n  " + gpudiag::escape_control(d);
  std::fprintf(stderr,
               "gpudiag: --baseline: %s does not look healthy; its numbers are in the baseline anyway:%s\n"
               "  Fix the node (or read the baseline of a healthy sibling) before copying this config to others.\n",
               gpudiag::escape_control(facts.host).c_str(), list.c_str());
  return 1;
}

// --config-keys: every key the config file may hold, as the loader declares it (one
// Markdown table, so the docs can take it as it is).
int print_config_keys() {
  std::string out = "| key | value | what for |\n| --- | --- | --- |\n";
  for (const auto& k : gpudiag::config_keys())
    out += "| `" + k.name + "` | " + k.type + " | " + k.help + " |\n";
  write_all(out);
  return 0;
}

int run(int argc, char** argv) {
  CLI::App app{"gpudiag-health: check this node's InfiniBand ports, PCIe ACS, IOMMU mode and GPUs.\n"
               "Exit codes: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN, 4 CRITICAL but --drain held back by the "
               "drain breaker."};
  std::string config_path, fs_root = "/", checks_arg, format = "human", node;
  std::string output_path, state_dir;
  bool quick = false, verbose = false, drain = false, resume = false, baseline = false, force = false;
  bool config_keys = false;
  double timeout = 0, write_timeout = gpudiag::kFileTimeoutS;
  app.add_option("--config", config_path, "config file (default: /etc/gpudiag/gpudiag.yaml if it exists)");
  app.add_option("--fs-root", fs_root, "read /sys and /proc under DIR instead of / (fixtures, containers)");
  app.add_option("--checks", checks_arg, "comma list of checks: " + gpudiag::known_checks_text());
  app.add_flag("--quick", quick,
               "only the checks that need no GPU initialisation: " + gpudiag::join(gpudiag::quick_checks(), ","));
  app.add_option("--format", format, "human, json, nhc or prometheus")
      ->check(CLI::IsMember({"human", "json", "nhc", "prometheus"}));
  app.add_option("--node", node, "node name for the report (default: health.node_name, else hostname -s)");
  app.add_option("--timeout", timeout, "time budget for all checks in seconds (default: health.timeout, 50)")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_flag("--drain", drain, "if CRITICAL, drain this node in Slurm with reason '<prefix> <finding>'");
  app.add_flag("--force", force,
               "with --drain: drain even when the drain breaker would hold it back (drain.max_nodes, "
               "drain.max_share)");
  app.add_flag("--resume", resume, "if OK and drained by gpudiag (reason starts with the prefix), resume it");
  app.add_option("--output", output_path,
                 "write the report to FILE atomically (0644, e.g. for node_exporter's textfile collector) "
                 "instead of stdout");
  app.add_option("--state-dir", state_dir,
                 "where xid and ibcounters remember the last run (default: health.state_dir, /var/lib/gpudiag; "
                 "none under --fs-root)");
  app.add_option("--write-timeout", write_timeout,
                 "seconds a write of --output or the run state may take before it is given up (a hung NFS mount, "
                 "a frozen filesystem); the report then goes to stdout (default: 10)")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_flag("-v,--verbose", verbose, "show every finding, including what is fine, and where GPUs and NICs sit");
  app.add_flag("--baseline", baseline,
               "print a config (YAML) of what this node has, to copy to its identical siblings; exit 1 if it "
               "looks sick");
  app.add_flag("--config-keys", config_keys, "list every key the config file may hold (a Markdown table) and exit");
  app.set_version_flag("--version", std::string("gpudiag-health ") + GPUDIAG_VERSION);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage_error(fmt::format("gpudiag-health: {} (see --help)", e.what()));
  }

  if (config_keys) return print_config_keys();

  gpudiag::Config cfg;
  if (!config_path.empty()) {
    auto loaded = gpudiag::load_config_file(config_path);
    if (!loaded) {
      bool missing = ::access(config_path.c_str(), R_OK) != 0;
      return usage_error(loaded.error() +
                         (missing ? " (check --config, or start from the example etc/gpudiag.yaml)" : ""));
    }
    cfg = *loaded;
  } else {
    struct stat st;
    if (::stat(gpudiag::kDefaultConfigPath, &st) == 0) {
      auto loaded = gpudiag::load_config_file(gpudiag::kDefaultConfigPath);
      if (!loaded) return usage_error(loaded.error());
      cfg = *loaded;
    }
  }

  struct stat st;
  if (::stat(fs_root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return usage_error(fmt::format("gpudiag-health: --fs-root {}: not a directory", fs_root));

  if (baseline) {
    if (quick || !checks_arg.empty() || drain || resume || format != "human")
      return usage_error("gpudiag-health: --baseline prints a config: give it alone (with --config, --fs-root)");
    gpudiag::RootedFs fs(fs_root);
    gpudiag::CheckContext ctx{fs, cfg, false};
    ctx.deadline = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(static_cast<long long>((timeout > 0 ? timeout : cfg.health.timeout_s) * 1000));
    return print_baseline(ctx);
  }

  if (force && !drain) return usage_error("gpudiag-health: --force goes with --drain");

  gpudiag::RunOptions opts;
  if (quick && !checks_arg.empty()) return usage_error("gpudiag-health: give --quick or --checks, not both");
  if (quick) {
    opts.checks = gpudiag::quick_checks();
  } else if (!checks_arg.empty()) {
    opts.checks = gpudiag::split_list(checks_arg);
    if (opts.checks.empty()) return usage_error("gpudiag-health: --checks is empty");
    for (const auto& c : opts.checks) {
      const auto& known = gpudiag::known_checks();
      if (std::find(known.begin(), known.end(), c) == known.end())
        return usage_error(
            fmt::format("gpudiag-health: --checks: unknown check '{}' (known: {})", c, gpudiag::known_checks_text()));
    }
  } else {
    opts.checks = cfg.health.checks.empty() ? gpudiag::quick_checks() : cfg.health.checks;
  }
  opts.timeout_s = timeout > 0 ? timeout : cfg.health.timeout_s;
  opts.want_topology = verbose || format == "json";
  if (node.empty()) node = cfg.health.node_name.empty() ? gpudiag::short_hostname() : cfg.health.node_name;

  gpudiag::RootedFs fs(fs_root);
  gpudiag::CheckContext ctx{fs, cfg, opts.want_topology};
  // A fixture's counters and log must not land in the host's state, so under
  // --fs-root state is kept only where asked.
  if (state_dir.empty()) state_dir = cfg.health.state_dir;
  if (!state_dir.empty() && state_dir[0] != '/')
    return usage_error("gpudiag-health: --state-dir must be an absolute path");
  if (state_dir.empty() && fs.is_host_root()) state_dir = gpudiag::kDefaultStateDir;
  const bool stateful = gpudiag::uses_run_state(opts.checks);
  gpudiag::RunState state =
      !stateful ? gpudiag::RunState::disabled("")
      : state_dir.empty()
          ? gpudiag::RunState::disabled("no run state under --fs-root without --state-dir: compared with nothing")
          : gpudiag::RunState::load(state_dir, node, write_timeout);
  ctx.state = &state;
  gpudiag::RunOutcome outcome = gpudiag::run_checks(ctx, opts, node);
  auto& report = outcome.report;
  // After a timeout a check may still be writing to it.
  if (!outcome.abandoned_thread) {
    auto saved = state.save();
    if (!saved) std::fprintf(stderr, "%s\n", saved.error().c_str());
  }

  // Slurm first: every format reports what was done about the node.
  int code = static_cast<int>(report.status);
  std::string slurm_line;
  if (drain || resume) {
    gpudiag::RealSlurm slurm(cfg.health.scontrol_timeout_s);
    auto acted = gpudiag::act_on_node(report, cfg, node, {drain, resume, force}, slurm);
    report.slurm = acted.outcome;
    if (!acted.error.empty()) {
      std::fprintf(stderr, "%s\n", acted.error.c_str());
      code = kExitUnknown;
    } else {
      slurm_line = fmt::format("Slurm: {} {}\n", node, acted.outcome.explanation);
      if (acted.outcome.action == "held_back") code = gpudiag::kExitHeldBack;
    }
  }

  std::string text;
  if (format == "json") text = gpudiag::format_json(report);
  else if (format == "nhc") text = gpudiag::format_nhc(report);
  else if (format == "prometheus") text = gpudiag::format_prometheus(report);
  else {
    const char* term = std::getenv("TERM");
    bool color = output_path.empty() && ::isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR") &&
                 !(term && std::string(term) == "dumb");
    text = gpudiag::format_human(report, verbose, color);
  }
  if (format == "human" && verbose && !drain && !resume) text += slurm_note(cfg, node);
  // Machine formats keep stdout for their own output.
  const bool human = format == "human";
  if (output_path.empty()) {
    write_all(text);
  } else if (auto written = gpudiag::write_file_atomically(gpudiag::place_of(output_path), text, 0644, write_timeout);
             !written) {
    // Nothing is lost: the report goes to stdout instead, and the exit code says so, by the
    // one precedence: a failed write is UNKNOWN, which never hides a CRITICAL (2) or a
    // breaker's hold (4) from the hooks that read only the code.
    std::fprintf(stderr, "%s (check --output)\n", written.error().c_str());
    write_all(text);
    if (code != 2 && code != gpudiag::kExitHeldBack) code = kExitUnknown;
  }
  if (!slurm_line.empty()) {
    if (human) write_all(slurm_line);
    else std::fprintf(stderr, "gpudiag-health: %s", slurm_line.c_str());
  }
  std::fflush(stdout);
  if (outcome.abandoned_thread) std::_Exit(code);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpudiag-health: internal error: %s\n", e.what());
    return kExitUnknown;
  }
}
