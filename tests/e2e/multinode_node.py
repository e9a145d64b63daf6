"""Makes the calling process one node of a multi-node test cluster, then runs a command.

Run inside fresh UTS and mount namespaces (`unshare --uts --mount --propagation
unchanged`; every mount is made private first, so nothing here reaches the host): sets the hostname, binds a
private /etc/hosts and a /dev/shm of its own, optionally shows an InfiniBand fixture as /sys/class/infiniband and
binds files over others (a per-node config), then execs the command. Every process
that later enters these namespaces (slurmd, its slurmstepd, the tasks) sees the same.

    multinode_node.py --hostname n1 --hosts FILE [--ib DIR] [--bind SRC:DST]... -- ARGV
"""
import argparse
import os
import socket
import subprocess
import sys


def mount(*args):
    subprocess.run(["mount", *args], check=True)


def make_mounts_private():
    # unshare runs with --propagation unchanged, because in a chroot (scripts/test-on)
    # / is no mount point and making it private fails: then make every mount that is
    # still shared private one by one, so nothing mounted here reaches another namespace.
    if subprocess.run(["mount", "--make-rprivate", "/"], capture_output=True).returncode == 0:
        return
    for _ in range(2):
        shared = []
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                optional = fields[6:fields.index("-")]
                if any(o.startswith("shared:") for o in optional):
                    shared.append(fields[4].replace("\\040", " "))
        for path in shared:
            subprocess.run(["mount", "--make-private", path], capture_output=True)
        if not shared:
            return
    raise SystemExit(f"gpudiag: cannot make these mounts private in the node's namespace: {shared}")


def show_ib_fixture(fixture, stage):
    # /sys/class/infiniband may not exist, and nothing can be created in sysfs: build a
    # copy of /sys/class from binds of its real entries plus the fixture, and bind that
    # over /sys/class. The real entries keep their relative links (../../devices/...).
    os.makedirs(stage, exist_ok=True)
    for name in os.listdir("/sys/class"):
        if name == "infiniband":
            continue
        os.makedirs(os.path.join(stage, name), exist_ok=True)
        mount("--bind", os.path.join("/sys/class", name), os.path.join(stage, name))
    os.makedirs(os.path.join(stage, "infiniband"), exist_ok=True)
    mount("--bind", fixture, os.path.join(stage, "infiniband"))
    mount("--rbind", stage, "/sys/class")


def private_dev_shm():
    # A real node has a /dev/shm of its own: node-local state there (the hang watchdog's
    # per-node dir, NCCL's segments) must not be one dir that every "node" shares. Same
    # size as the host's, so the preflight's /dev/shm check sees what it would there.
    st = os.statvfs("/dev/shm")
    mount("-t", "tmpfs", "-o", f"mode=1777,nosuid,nodev,size={st.f_blocks * st.f_frsize}", "gpudiag-node-shm",
          "/dev/shm")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hostname", required=True)
    ap.add_argument("--hosts", required=True)
    ap.add_argument("--ib")
    ap.add_argument("--stage")
    ap.add_argument("--bind", action="append", default=[])
    ap.add_argument("argv", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    argv = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    make_mounts_private()
    socket.sethostname(a.hostname)
    mount("--bind", a.hosts, "/etc/hosts")
    private_dev_shm()
    if a.ib:
        show_ib_fixture(a.ib, a.stage)
    for pair in a.bind:
        src, dst = pair.split(":", 1)
        mount("--bind", src, dst)
    sys.stdout.flush()
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()
