#include "util/run_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "util/spawn_child.h"
#include "util/text_lists.h"

namespace gpudiag {
namespace {

using Clock = std::chrono::steady_clock;

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Reads what is available; false at EOF or error.
bool drain_into(int fd, std::string& into, std::size_t max) {
  char buf[16384];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      std::size_t room = into.size() < max ? max - into.size() : 0;
      into.append(buf, std::min<std::size_t>(room, static_cast<std::size_t>(n)));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    return false;
  }
}

}  // namespace

CommandResult run_command(const std::vector<std::string>& argv, double timeout_s, std::size_t max_output) {
  CommandResult r;
  if (argv.empty()) {
    r.error = "no command";
    return r;
  }
  SpawnedChild child = spawn_child(argv);
  if (!child.started()) {
    r.error = child.error;
    return r;
  }
  const pid_t pid = child.pid;
  int out[2] = {child.out, -1}, err[2] = {child.err, -1};
  r.started = true;
  ::fcntl(out[0], F_SETFL, O_NONBLOCK);
  ::fcntl(err[0], F_SETFL, O_NONBLOCK);

  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  int status = 0;
  bool reaped = false;  // exited (still a zombie until the final waitpid)
  while (true) {
    pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    // Wake up now and then to reap: a grandchild may hold the pipes open after the
    // command itself has exited.
    ::poll(fds, 2, static_cast<int>(std::min<long long>(left, 50)));
    if (out[0] >= 0 && !drain_into(out[0], r.out, max_output)) close_fd(out[0]);
    if (err[0] >= 0 && !drain_into(err[0], r.err, max_output)) close_fd(err[0]);
    // WNOWAIT: notice the exit but leave the zombie, so its pid (our group id) cannot
    // be reused before the group kill below.
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid)
      reaped = true;
    if (reaped) {
      // Exited: what it wrote is in the pipes already; take it and stop.
      if (out[0] >= 0) drain_into(out[0], r.out, max_output);
      if (err[0] >= 0) drain_into(err[0], r.err, max_output);
      break;
    }
  }
  // Whatever is left of the group goes. The child is not reaped yet, so the group id
  // is still ours and cannot name anything else.
  ::kill(-pid, SIGKILL);
  r.timed_out = !reaped;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  close_fd(out[0]);
  close_fd(err[0]);
  if (!r.timed_out) {
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  }
  return r;
}

std::string describe_failure(const std::string& name, const CommandResult& r, double timeout_s) {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%g", timeout_s);
  if (!r.started) return "cannot run " + name + ": " + r.error;
  if (r.timed_out) return name + " timed out after " + secs + " s (is slurmctld reachable?)";
  std::string said = first_line(r.err.empty() ? r.out : r.err);
  if (r.signal) return name + " was killed by signal " + std::to_string(r.signal) + (said.empty() ? "" : ": " + said);
  return name + " exited " + std::to_string(r.exit_code) + (said.empty() ? "" : ": " + said);
}

}  // namespace gpudiag
