#!/usr/bin/python3
"""Seeds each fuzz target's corpus from the project's test inputs:

- the generated sysfs fixture trees (IB port files, numa_node and ids, PCI config
  space, /proc/cmdline), every file of the right name;
- string literals the unit tests feed to each parser (configs, --diag lists,
  plugstack arguments, scontrol output, probe JSON);
- the shipped config, the e2e tests' --diag values, this machine's /proc/*/stat;
- fuzz/seeds/<target>/, for inputs no test holds as a file (NCCL logs in the
  wording of several versions, whole probe answers).

Usage: make_seeds.py --source REPO --fixtures BUILD/fixtures --out DIR
Writes DIR/<target>/<sha1 of content>, so the same input is stored once.
"""
import argparse
import codecs
import glob
import hashlib
import os
import re
import shutil
import struct

IB_FILES = {"state", "phys_state", "rate", "link_layer"}
NUMBER_FILES = {"numa_node", "vendor", "device", "class", "subsystem_vendor", "current_link_speed",
                "current_link_width", "max_link_speed", "max_link_width"}
DURATIONS = ["30s", "5m", "1.5h", "2h30m", "0", "10", "250ms", "1GiB", "256MiB", "4k", "1e3", "-1s", "9999999999999d"]

# Parser call -> target: literals passed to these calls in tests/unit/*.cpp.
CALLS = {
    "parse_config": "config",
    "parse_diag_list": "diag_list",
    "parse_port_state": "ib_attrs",
    "parse_rate_gbps": "ib_attrs",
    "parse_link_layer": "ib_attrs",
    "parse_int_attr": "sysfs_numbers",
    "parse_hex_attr": "sysfs_numbers",
    "parse_duration": "sysfs_numbers",
    "parse_size": "sysfs_numbers",
    "parse_link_speed_gts": "sysfs_numbers",
    "parse_link_width": "sysfs_numbers",
    "parse_kernel_release": "sysfs_numbers",
    "parse_nvidia_version": "sysfs_numbers",
    "parse_memlock_limit": "sysfs_numbers",
    "iommu_cmdline_args": "cmdline",
    "parse_nccl_line": "nccl_log",
    "parse_proc_stat": "proc_stat",
    "parse_scontrol_node": "scontrol_node",
    "parse_kmsg_record": "kmsg",
    "parse_kmsg_text": "kmsg",
    "parse_xid_message": "kmsg",
    "parse_barrier_report": "barrier",
    "parse_barrier_verdict": "barrier",
    "parse_barrier_env": "barrier",
    "parse_test_report": "fabric_wire",
    "parse_order": "fabric_wire",
    "parse_endpoint": "fabric_wire",
    "parse_qp_info": "qp_info",
}
LITERAL = r'(R"\((?:.|\n)*?\)"|"(?:[^"\\\n]|\\.)*")'


def decode(lit):
    if lit.startswith('R"('):
        return lit[3:-2].encode()
    return codecs.escape_decode(lit[1:-1].encode())[0]


class Seeds:
    def __init__(self, out):
        self.out = out
        self.count = {}

    def add(self, target, data):
        if isinstance(data, str):
            data = data.encode()
        d = os.path.join(self.out, target)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, hashlib.sha1(data).hexdigest())
        if not os.path.exists(path):
            with open(path, "wb") as f:
                f.write(data)
            self.count[target] = self.count.get(target, 0) + 1


def read(path, limit=1 << 16):
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return None


def from_fixtures(seeds, root):
    for dirpath, dirs, files in os.walk(root):  # symlinks are not followed
        for name in files:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                continue
            if name in IB_FILES and "/infiniband/" in path:
                target = "ib_attrs"
            elif name in NUMBER_FILES:
                target = "sysfs_numbers"
            elif name == "config" and "/sys/" in path:
                target = "pci_config"
            elif name == "cmdline" and path.endswith("/proc/cmdline"):
                target = "cmdline"
            elif name == "kmsg" and path.endswith("/dev/kmsg"):
                target = "kmsg"
            else:
                continue
            data = read(path, 8192)
            if data is not None:
                seeds.add(target, data)


def from_unit_tests(seeds, source):
    # tests/unit mirrors the source tree (one folder per room): every level.
    for path in glob.glob(os.path.join(source, "tests/unit/**/*.cpp"), recursive=True):
        text = open(path, encoding="utf-8", errors="replace").read()
        for call, target in CALLS.items():
            for m in re.finditer(re.escape(call) + r"\(\s*" + LITERAL, text):
                seeds.add(target, decode(m.group(1)))
        # Named raw-string constants (kDrained, ...) hold scontrol output and JSON.
        for m in re.finditer(r'R"\((?:.|\n)*?\)"', text):
            data = decode(m.group(0))
            if b"NodeName=" in data:
                seeds.add("scontrol_node", data)
            elif data.lstrip().startswith(b"{"):
                seeds.add("probe_json", data)
            elif b"TID " in data or b"(LWP " in data or b"MainThread" in data:
                seeds.add("stack_verdict", data)  # what the stack tools print
        for m in re.finditer(r"parse_plugin_args\(\{([^}]*)\}\)", text):
            seeds.add("plugin_args", b"\n".join(decode(l) for l in re.findall(LITERAL, m.group(1))))


def from_e2e(seeds, source):
    for path in glob.glob(os.path.join(source, "tests/e2e/*.py")) + glob.glob(os.path.join(source, "tests/packaging/*.py")):
        text = open(path, encoding="utf-8", errors="replace").read()
        for m in re.finditer(r'--diag=([^"\' ]+)', text):
            seeds.add("diag_list", m.group(1))
        for m in re.finditer(r'config=([^"\' ]+)', text):
            seeds.add("plugin_args", "config=" + m.group(1))


def from_files(seeds, source):
    for yaml in [os.path.join(source, "etc/gpudiag.yaml"), os.path.join(source, "tests/fixtures/nodes.yaml")]:
        data = read(yaml)
        if data:
            seeds.add("config", data)
            seeds.add("line_prefixer", b"\x00\x05" + data)
    for d in DURATIONS:
        seeds.add("sysfs_numbers", d)
    cmdline = read("/proc/cmdline")
    if cmdline:
        seeds.add("cmdline", cmdline)
    for stat in sorted(glob.glob("/proc/[0-9]*/stat"))[:40]:
        data = read(stat)
        if data:
            seeds.add("proc_stat", data)
    for target in os.listdir(os.path.join(source, "fuzz/seeds")):
        for path in glob.glob(os.path.join(source, "fuzz/seeds", target, "*")):
            data = read(path)
            seeds.add(target, data)
            if target == "nccl_log":
                seeds.add("line_prefixer", b"\xc0\x40" + data)   # real line limit, 64-byte reads
                seeds.add("line_prefixer", b"\x01\x07" + data)   # tiny limit: lines split
    seeds.add("line_prefixer", b"\x10\x03no newline at the end\x00\xff\r\n\n\n")
    # Handoffs as a task sends them (node_relay_wire.h): both streams tagged, one raw.
    for local, flags, tag in ((0, 15, b"[node-07:12]"), (3, 1 | 4, b"[n1:3]"), (9, 2, b"")):
        seeds.add("handoff", b"GDR1" + struct.pack("=IIBH", local, 1024, flags, len(tag)) + tag)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.out, ignore_errors=True)
    seeds = Seeds(a.out)
    from_fixtures(seeds, a.fixtures)
    from_unit_tests(seeds, a.source)
    from_e2e(seeds, a.source)
    from_files(seeds, a.source)
    print("fuzz seeds: " + ", ".join(f"{t} {n}" for t, n in sorted(seeds.count.items())))


if __name__ == "__main__":
    main()
