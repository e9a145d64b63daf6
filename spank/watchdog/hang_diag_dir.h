#pragma once
// What the hang watchdog does in the diag dir, each step bounded in time (issue 30
// leftover). The diag dir may lie on NFS, and a mount that hangs makes every open,
// create, write and listing there wait in the kernel, uninterruptibly, for as long as
// it hangs: done by the relay itself, that held back the SIGTERM and the SIGKILL of a
// hung step just as long. So each step runs in a forked child (util/deadline_child.h)
// with plain syscalls only, and the relay gives up at the deadline. Once one step got
// no answer, the dir counts as not answering and the later steps are skipped at once:
// the kill waits for the diag dir one deadline at most, however many steps remain.
//
// The checks are the rules of util/private_file.h: the dir is opened once (not a link,
// then fstat: still this user's private dir) and every name made or read relative to
// that fd; a report or hang.declared is only ever a new regular file (0600), a taken
// report name gives hang.<host>.<random>.txt, and torch is asked only through its FIFO.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace gpudiag {

class HangDiagDir {
 public:
  // `dir` "" : the step has no diag dir (every step then fails with a reason, at once).
  HangDiagDir(std::string dir, double timeout_s) : dir_(std::move(dir)), timeout_s_(timeout_s) {}

  const std::string& path() const { return dir_; }
  // False once a step got no answer within the deadline: later steps are not tried.
  bool answering() const { return silent_.empty(); }

  // Whether this node is the one to signal the step: it created hang.declared, which
  // names `host`. True too when the dir cannot say (a few signals too many, never none).
  bool claim_declared(const std::string& host);
  // The node named in hang.declared (control bytes escaped), or "".
  std::string declared_by();
  // Writes "1\n" to torch's fr_pipe.rank<R>.pipe of each rank (a FIFO of this user's,
  // opened without blocking): true when at least one took it.
  bool ask_torch(const std::vector<int>& ranks);
  // Writes the report to hang.<host>.txt, or when that name is taken to
  // hang.<host>.<random>.txt. Returns the path, or "" with `why` set (naming the dir).
  std::string write_report(const std::string& host, const std::string& text, std::string& why);
  // The names in the dir; false (and `out` empty) when it cannot be read.
  bool names(std::vector<std::string>& out);

 private:
  // Runs `work` in a child under the deadline; false (and the dir marked silent) when
  // no answer came. `got` is what the child wrote.
  bool bounded(double timeout_s, std::size_t max_bytes, const std::function<void(int out)>& work, std::string& got);

  std::string dir_;
  double timeout_s_;
  std::string silent_;  // why the dir counts as not answering; "" while it answers
};

}  // namespace gpudiag
