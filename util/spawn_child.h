#pragma once
// The one way gpudiag starts another program (issue 30). Whatever it runs and whoever it
// runs as, the child holds nothing of ours but what we hand it:
// - its own session (setsid): no controlling terminal, so neither it nor a user who
//   traces it can open /dev/tty or push input into ours (TIOCSTI);
// - stdin /dev/null, stdout and stderr pipes that only we read, no other fd of ours
//   (everything from 3 up is closed), every signal at its default and none blocked;
// - as another user (ChildUser): a session keyring of its own, the cwd `/`, that user's
//   groups, gid and uid for good (setuid(0) must fail) and the environment it is given.
// No shell: argv goes straight to exec; argv[0] without a slash is looked up in PATH
// (absolute entries only).
#include <sys/types.h>

#include <string>
#include <vector>

namespace gpudiag {

struct ChildUser {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  std::vector<std::string> env;  // the child's whole environment, NAME=VALUE
};

struct SpawnedChild {
  pid_t pid = -1;          // -1: not started, `error` says why
  int out = -1, err = -1;  // our read ends (close-on-exec); the caller closes them
  std::string error;
  bool started() const { return pid > 0; }
};

// An executable regular file named `name` in PATH's absolute entries, or "".
std::string find_on_path(const std::string& name);

// Starts argv as described above; `as` null: as ourselves, with our environment and
// `extra_env` (NAME=VALUE, replacing ours of the same name). A secret goes there, never in
// argv: /proc/PID/environ is its owner's to read, /proc/PID/cmdline everyone's.
SpawnedChild spawn_child(const std::vector<std::string>& argv, const ChildUser* as = nullptr,
                         const std::vector<std::string>& extra_env = {});

}  // namespace gpudiag
