"""Real, unprivileged throwaway accounts for tests that play a hostile neighbour.

    with ThrowawayUsers("victim", "attacker") as users:
        victim, attacker = users["victim"], users["attacker"]
        attacker.run(["mkfifo", path])
        victim.run(["srun", "-n1", "true"], env=cluster.env, cwd=victim.home)

Each account is made with useradd under a random name (two runs never collide), gets a
private home (0700) under one temp dir, and is deleted on exit, also when the test
fails or the run gets SIGINT/SIGTERM: its processes are killed first (pkill -KILL -u),
then userdel. Commands run through runuser, without a shell.
"""
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import time

from torn_down import TornDownOnSignal


class User:
    def __init__(self, role, name, home):
        self.role = role
        self.name = name
        self.home = home
        pw = pwd.getpwnam(name)
        self.uid = pw.pw_uid
        self.gid = pw.pw_gid

    def run(self, argv, env=None, cwd=None, check=False, timeout=120, text=True, **kw):
        """argv as this user (runuser, no shell). `env` is the full environment to pass:
        runuser keeps the caller's, so it is given explicitly through env(1)."""
        e = dict(env if env is not None else os.environ)
        e.update(HOME=self.home, USER=self.name, LOGNAME=self.name)
        assigns = [f"{k}={v}" for k, v in e.items() if "=" not in k]
        full = ["runuser", "-u", self.name, "--", "env", "-i", *assigns, *argv]
        r = subprocess.run(full, cwd=cwd or self.home, capture_output=True, text=text, timeout=timeout, **kw)
        if check and r.returncode != 0:
            raise AssertionError(f"as {self.name}: {argv} exited {r.returncode}\nstdout: {r.stdout[-2000:]!r}\n"
                                 f"stderr: {r.stderr[-2000:]!r}")
        return r

    def popen(self, argv, env=None, cwd=None, **kw):
        e = dict(env if env is not None else os.environ)
        e.update(HOME=self.home, USER=self.name, LOGNAME=self.name)
        assigns = [f"{k}={v}" for k, v in e.items() if "=" not in k]
        return subprocess.Popen(["runuser", "-u", self.name, "--", "env", "-i", *assigns, *argv],
                                cwd=cwd or self.home, **kw)


class ThrowawayUsers(TornDownOnSignal):
    def __init__(self, *roles):
        self.roles = roles or ("victim", "attacker")
        self.users = {}
        self.dir = None

    def _setup(self):
        self.dir = tempfile.mkdtemp(prefix="gpudiag-users-")
        os.chmod(self.dir, 0o755)
        for role in self.roles:
            name = f"gd{role[:6]}{secrets.token_hex(3)}"
            home = os.path.join(self.dir, name)
            subprocess.run(["useradd", "--no-create-home", "--home-dir", home, "--shell", "/usr/sbin/nologin",
                            "--user-group", name], check=True, capture_output=True)
            os.makedirs(home)
            self.users[role] = User(role, name, home)
            os.chown(home, self.users[role].uid, self.users[role].gid)
            os.chmod(home, 0o700)

    def __getitem__(self, role):
        return self.users[role]

    def _teardown(self):
        self.close()

    def close(self):
        for user in self.users.values():
            # A user with processes cannot be deleted; kill them until none is left.
            for _ in range(50):
                subprocess.run(["pkill", "-KILL", "-u", user.name], capture_output=True)
                if subprocess.run(["pgrep", "-u", user.name], capture_output=True).returncode != 0:
                    break
                time.sleep(0.1)
            subprocess.run(["userdel", user.name], capture_output=True)
        self.users = {}
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    @staticmethod
    def leftovers():
        """Accounts this module made that still exist (a test asserts there are none)."""
        return [p.pw_name for p in pwd.getpwall() if p.pw_name.startswith("gd") and p.pw_dir.startswith(
            tempfile.gettempdir() + "/gpudiag-users-")]
