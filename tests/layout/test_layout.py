#!/usr/bin/env python3
"""The tree's shape (issue 20): each code folder includes only from the folders
docs/ARCHITECTURE.md §2 lets it use, and README's layout table names every folder of the
tree and nothing that is not there."""
import fnmatch
import os
import re
import unittest

SOURCE = os.environ.get("GPUDIAG_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))

# Folder -> the folders its sources may include from (ARCHITECTURE §2), besides itself.
MAY_USE = {
    "util": set(),
    "config": {"util"},
    "nodeinfo": {"util"},
    "nccllog": {"util"},
    "stacks": {"nodeinfo", "util"},
    "probe": {"util"},
    "healthcheck": {"config", "nodeinfo", "util", "probe/probe_json.h"},
    "fabric": {"config", "nodeinfo", "util", "probe/probe_json.h"},
    "spank": {"config", "fabric", "nodeinfo", "nccllog", "stacks", "util"},
    "cli": {"stacks", "nccllog", "nodeinfo", "util"},
}
# spank/'s rooms by job (issue 36, ARCHITECTURE §2): spank/ holds only these folders and
# its CMakeLists.txt, and an include names the room it comes from. Room -> the rooms its
# sources may include from, besides itself. The plan decides and names no room: what it
# hands a room (HangWatch, RelayPlan) and the facts it judges (RendezvousFacts,
# SlurmNodeAddr) are its own types, in plan/. The rooms carry the plan out; the relay
# process runs the watchdog; the Slurm glue calls every room.
SPANK_ROOM_MAY_USE = {
    "plan": set(),
    "watchdog": {"plan"},
    "preflight": {"plan"},
    "relay": {"plan", "watchdog"},
    "slurm": {"plan", "relay", "watchdog", "preflight"},
}
SPANK_ROOMS = set(SPANK_ROOM_MAY_USE)
# healthcheck/'s rooms by job (ARCHITECTURE §2, §4), the same way; main.cpp, the program,
# stays at the top and may use every room. The report and the run state are leaves; the
# checks fill the report and keep their state between runs; the baseline reads the facts
# the checks gather; the drain rule judges a report and names no check.
HEALTH_ROOM_MAY_USE = {
    "report": set(),
    "state": set(),
    "checks": {"report", "state"},
    "baseline": {"checks"},
    "drain": {"report"},
}
# Folder in rooms -> (its rooms and the rooms each may use, the files it keeps at its top).
ROOMED = {
    "spank": (SPANK_ROOM_MAY_USE, {"CMakeLists.txt"}),
    "healthcheck": (HEALTH_ROOM_MAY_USE, {"CMakeLists.txt", "main.cpp"}),
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([^"]+)"', re.M)


def code_folders():
    """Top-level folders with a CMakeLists.txt that build product code."""
    return sorted(d for d in os.listdir(SOURCE)
                  if os.path.isfile(os.path.join(SOURCE, d, "CMakeLists.txt"))
                  and d not in ("tests", "fuzz", "packaging"))


def ignored_dirs():
    """The folder patterns .gitignore names (build/, build-*/): a fresh tree has build/
    with only setup's logs in it before the first configure."""
    with open(os.path.join(SOURCE, ".gitignore"), encoding="utf-8") as f:
        return [line.strip().strip("/") for line in f if line.strip().endswith("/") and not line.startswith("#")]


def tree_folders():
    """Top-level folders and the folders in tests/, without build trees or hidden ones."""
    ignored = ignored_dirs()

    def keep(base, d):
        p = os.path.join(base, d)
        return (os.path.isdir(p) and not d.startswith(".")
                and not any(fnmatch.fnmatch(d, pat) for pat in ignored)
                and not os.path.exists(os.path.join(p, "CMakeCache.txt")))
    top = [d for d in os.listdir(SOURCE) if keep(SOURCE, d)]
    tests = [f"tests/{d}" for d in os.listdir(os.path.join(SOURCE, "tests")) if keep(os.path.join(SOURCE, "tests"), d)]
    return sorted(top + tests)


def layout_paths():
    with open(os.path.join(SOURCE, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    paths = []
    for line in section.splitlines():
        m = re.match(r"^\| `([^`]+)`(?:, `([^`]+)`)? \|", line)
        if m:
            paths += [p.rstrip("/") for p in m.groups() if p]
    return paths


class Dependencies(unittest.TestCase):
    def test_every_code_folder_has_rules(self):
        self.assertEqual(code_folders(), sorted(MAY_USE))

    def test_includes_follow_the_rules(self):
        wrong = []
        for folder, allowed in MAY_USE.items():
            # A folder's subfolders (stacks/verdict/) are part of it.
            paths = sorted(os.path.relpath(os.path.join(d, n), os.path.join(SOURCE, folder))
                           for d, _, names in os.walk(os.path.join(SOURCE, folder)) for n in names)
            for name in paths:
                if not name.endswith((".cpp", ".h")):
                    continue
                with open(os.path.join(SOURCE, folder, name), encoding="utf-8") as f:
                    for other, header in INCLUDE.findall(f.read()):
                        if other != folder and other not in allowed and f"{other}/{header}" not in allowed:
                            wrong.append(f"{folder}/{name} includes {other}/{header}")
        self.assertEqual(wrong, [], "a folder uses one that ARCHITECTURE §2 does not let it use")


    def rooms_hold_everything(self, folder):
        rules, top_files = ROOMED[folder]
        base = os.path.join(SOURCE, folder)
        rooms = {d for d in os.listdir(base) if os.path.isdir(os.path.join(base, d))}
        loose = sorted(n for n in os.listdir(base) if n not in rooms and n not in top_files)
        self.assertEqual(rooms, set(rules), f"{folder}/'s folders are not the rooms ARCHITECTURE §2 names")
        self.assertEqual(loose, [], f"files in {folder}/ outside its rooms")
        wrong = []
        for d, subdirs, names in os.walk(SOURCE):
            # Not build trees, not hidden folders (.git).
            subdirs[:] = [s for s in subdirs if not s.startswith(".")
                          and not os.path.exists(os.path.join(d, s, "CMakeCache.txt"))]
            for n in names:
                if n.endswith((".cpp", ".h")):
                    with open(os.path.join(d, n), encoding="utf-8", errors="replace") as f:
                        for other, header in INCLUDE.findall(f.read()):
                            if other == folder and header.split("/", 1)[0] not in rules:
                                wrong.append(f"{os.path.relpath(os.path.join(d, n), SOURCE)} includes {folder}/{header}")
        self.assertEqual(wrong, [], f"an include of {folder}/ that names no room")

    def rooms_include_only_what_they_may_use(self, folder):
        rules, _ = ROOMED[folder]
        wrong = []
        for room, allowed in rules.items():
            base = os.path.join(SOURCE, folder, room)
            for name in sorted(os.listdir(base)):
                if not name.endswith((".cpp", ".h")):
                    continue
                with open(os.path.join(base, name), encoding="utf-8") as f:
                    for other, header in INCLUDE.findall(f.read()):
                        if other != folder:
                            continue
                        used = header.split("/", 1)[0]
                        if used != room and used not in allowed:
                            wrong.append(f"{folder}/{room}/{name} includes {folder}/{header}")
        self.assertEqual(wrong, [], f"a {folder} room reaches into one ARCHITECTURE §2 does not let it use")

    def test_spank_is_in_rooms(self):
        self.rooms_hold_everything("spank")

    def test_spank_rooms_include_only_the_rooms_they_may_use(self):
        self.rooms_include_only_what_they_may_use("spank")

    def test_healthcheck_is_in_rooms(self):
        self.rooms_hold_everything("healthcheck")

    def test_healthcheck_rooms_include_only_the_rooms_they_may_use(self):
        self.rooms_include_only_what_they_may_use("healthcheck")

    def test_the_python_reader_stands_alone(self):
        """stacks/pyframes/ (ARCHITECTURE §2, §5a) uses only itself: the fuzzers and the
        reader's tests link it without the rest of gpudiag."""
        base = os.path.join(SOURCE, "stacks", "pyframes")
        wrong = []
        for name in sorted(os.listdir(base)):
            if name.endswith((".cpp", ".h")):
                with open(os.path.join(base, name), encoding="utf-8") as f:
                    for other, header in INCLUDE.findall(f.read()):
                        if not f"{other}/{header}".startswith("stacks/pyframes/"):
                            wrong.append(f"stacks/pyframes/{name} includes {other}/{header}")
        self.assertEqual(wrong, [])


def source_room(path):
    """The source folder a unit test's folder mirrors (tests/unit/spank/relay -> spank/relay)."""
    return os.path.relpath(path, os.path.join(SOURCE, "tests", "unit")).replace(os.sep, "/")


def may_include(room):
    """What a test of `room` may include from our code: its room and what the room may use.
    A top folder's subfolders are part of it (stacks/verdict/ is stacks/); the rooms of
    spank/ and healthcheck/ are rooms of their own, each with the rooms it may use."""
    top = room.split("/", 1)[0]
    if top in ROOMED and "/" in room:
        name = room.split("/")[1]
        rooms = {f"{top}/{r}" for r in {name} | ROOMED[top][0].get(name, set())}
        return rooms | MAY_USE[top]
    return {top} | MAY_USE.get(top, set())


class TestsFollowTheSource(unittest.TestCase):
    """Issue 36: tests/unit/ mirrors the source tree. A unit test file lives in the folder
    of the source it tests (tests/unit/spank/relay/test_line_prefixer.cpp,
    tests/unit/healthcheck/checks/test_check_ib.cpp), includes at
    least one header of that room and, of our code, only what that room may use itself:
    no test file spans rooms."""

    def unit_tests(self):
        base = os.path.join(SOURCE, "tests", "unit")
        for d, _, names in os.walk(base):
            for n in sorted(names):
                if n.startswith("test_") and n.endswith(".cpp"):
                    yield d, n

    def test_each_unit_test_lives_in_a_source_room(self):
        wrong = []
        for d, n in self.unit_tests():
            room = source_room(d)
            src = os.path.join(SOURCE, room)
            has_sources = room != "." and os.path.isdir(src) and any(
                x.endswith((".cpp", ".h")) for x in os.listdir(src))
            if not has_sources:
                wrong.append(f"tests/unit/{room}/{n}" if room != "." else f"tests/unit/{n}")
        self.assertEqual(wrong, [], "unit tests outside a folder that mirrors a source folder")

    def test_each_unit_test_names_one_room(self):
        wrong = []
        for d, n in self.unit_tests():
            room = source_room(d)
            if room == ".":
                continue  # the test above names it
            allowed = may_include(room)
            with open(os.path.join(d, n), encoding="utf-8", errors="replace") as f:
                includes = [f"{o}/{h}" for o, h in INCLUDE.findall(f.read())]
            own = [i for i in includes if os.path.dirname(i) == room]
            if not own:
                wrong.append(f"tests/unit/{room}/{n} includes no header of {room}/")
            for i in includes:
                top = i.split("/", 1)[0]
                if top in ("tests", "fuzz"):  # test helpers, a fuzz target's shared mode
                    continue
                key = "/".join(i.split("/")[:2]) if top in ROOMED else top
                if key not in allowed:
                    wrong.append(f"tests/unit/{room}/{n} includes {i}")
        self.assertEqual(wrong, [], "a unit test reaches past its room (ARCHITECTURE §2)")


class ReadmeLayout(unittest.TestCase):
    def test_names_every_folder(self):
        named = set(layout_paths())
        missing = []
        for d in tree_folders():
            if d in named or d == "tests":
                continue
            # A folder may instead be covered file by file (docs/).
            files = [f"{d}/{f}" for f in os.listdir(os.path.join(SOURCE, d))]
            if not files or not all(f in named for f in files):
                missing.append(d)
        self.assertEqual(missing, [], "README's layout table lacks these folders")

    def test_names_spank_rooms(self):
        named = set(layout_paths())
        self.assertEqual(sorted(f"spank/{r}" for r in SPANK_ROOMS if f"spank/{r}" not in named), [])

    def test_names_healthcheck_rooms(self):
        named = set(layout_paths())
        self.assertEqual(sorted(f"healthcheck/{r}" for r in HEALTH_ROOM_MAY_USE
                                if f"healthcheck/{r}" not in named), [])

    def test_names_nothing_that_is_not_there(self):
        gone = [p for p in layout_paths() if not os.path.exists(os.path.join(SOURCE, p))]
        self.assertEqual(gone, [], "README's layout table names paths the tree does not have")


if __name__ == "__main__":
    unittest.main()
