#!/usr/bin/python3
"""docs/architecture.md's table of targets against the build, and the layering it states.

Checks, from the CMakeLists.txt files and the sources alone (no build needed):
  1. every library and executable of the product (and tests/fakes) is a row of the table, in the
     folder the table gives, and every row is a target;
  2. a row's links (the targets in backquotes) are exactly the hpod targets its
     target_link_libraries names;
  3. links run downward: no cycle among the targets;
  4. every #include "dir/file.h" of a target's sources and headers names a header of the target
     itself or of a target it links (directly or through others): a room cannot reach into one
     it does not depend on;
  5. every file the table of the controller's rooms names ("`Type` (file.h)") is a header of
     server/core or server/store.
Prints what is wrong and exits 1, or prints a one-line summary.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "architecture.md")
# Folders whose CMakeLists.txt define product targets (tests/fakes: the doubles).
SKIP_DIRS = {"build", "build-fuzz", "build-noslurm", "bench", "examples", ".git", "node_modules"}
# Headers that belong to a target other than their folder's first library.
HEADER_OWNERS = {"backend/resources.h": "hpo_backend_types",
                 "slurm_backend/slurm_placement.h": "hpo_slurm_placement",
                 "tests/fakes/fake_slurm.h": "hpo_fake_slurm"}
# Header-only headers any target may include without linking their folder's library.
HEADER_ONLY = {"common/layout.h", "common/process_group.h", "backend/shim_signals.h"}
GENERATED = {"common/version.h": "hpo_common"}


def cmake_files():
    for dirpath, dirnames, filenames in os.walk(ROOT):
        rel = os.path.relpath(dirpath, ROOT)
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith("build")]
        if rel.startswith("tests") and rel != os.path.join("tests", "fakes"):
            continue
        if rel == ".":
            continue
        if "CMakeLists.txt" in filenames:
            yield rel, os.path.join(dirpath, "CMakeLists.txt")


def calls(text, name):
    """The argument lists of every `name(...)` call in a CMake file."""
    for m in re.finditer(r"\b%s\s*\(" % re.escape(name), text):
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        args = re.sub(r"#[^\n]*", "", text[m.end():i - 1])
        yield args.split()


def read_build():
    targets = {}  # name -> {folder, sources, links, kind}
    for folder, path in cmake_files():
        text = open(path).read()
        for kind in ("add_library", "add_executable"):
            for args in calls(text, kind):
                name = args[0]
                if not (name.startswith("hpo") or name == "hpod"):
                    continue
                sources = [a for a in args[1:] if a.endswith(".cc")]
                targets[name] = {"folder": folder, "sources": sources, "links": set(),
                                 "interface": "INTERFACE" in args}
        for args in calls(text, "target_link_libraries"):
            if args and args[0] in targets:
                targets[args[0]]["links"].update(args[1:])
    names = set(targets)
    for t in targets.values():
        t["links"] = {l for l in t["links"] if l in names}
    return targets


def table_rows(header):
    """The cells of each row of the table in DOC whose header line starts with `header`."""
    in_table = False
    for line in open(DOC):
        if line.startswith(header):
            in_table = True
            continue
        if in_table and not line.startswith("|"):
            return
        if in_table and not line.startswith("|---"):
            yield [c.strip() for c in line.strip().strip("|").split("|")]


def read_table():
    rows = {}
    for cells in table_rows("| target | folder |"):
        names = re.findall(r"`([^`]+)`", cells[0])
        folder = cells[1].split()[0].rstrip("/")
        links = set(re.findall(r"`([^`]+)`", cells[3]))
        for n in names:
            rows[n] = {"folder": folder, "links": links}
    return rows


def closure(targets, name, seen=None):
    seen = set() if seen is None else seen
    for l in targets[name]["links"]:
        if l not in seen:
            seen.add(l)
            closure(targets, l, seen)
    return seen


def main():
    errors = []
    targets = read_build()
    rows = read_table()
    for name, t in sorted(targets.items()):
        row = rows.get(name)
        if row is None:
            errors.append(f"{name} ({t['folder']}/) is a target but not a row of {DOC}")
            continue
        if row["folder"] != t["folder"]:
            errors.append(f"{name}: the table says {row['folder']}/, the build {t['folder']}/")
        if row["links"] != t["links"]:
            errors.append(f"{name}: the table links {sorted(row['links'])}, the build "
                          f"{sorted(t['links'])}")
    for name in sorted(set(rows) - set(targets)):
        errors.append(f"{name} is a row of the table but no target")

    # 3. No cycle.
    for name in targets:
        if name in closure(targets, name):
            errors.append(f"{name} links itself through {sorted(closure(targets, name))}")

    # 4. Includes stay within what a target links. A header belongs to the first library of its
    # folder (or HEADER_OWNERS); proto's generated headers to hpo_proto.
    folder_owner = {}
    for name, t in targets.items():
        if not t["interface"] and t["folder"] not in folder_owner and not name == "hpo-shim":
            folder_owner[t["folder"]] = name
    # A folder's library owns the headers below it unless a deeper folder has a target.
    def owner_of(header):
        if header in HEADER_OWNERS:
            return HEADER_OWNERS[header]
        if header in GENERATED:
            return GENERATED[header]
        if header.startswith("hpo/v1/"):
            return "hpo_proto"
        d = os.path.dirname(header)
        while d:
            if d in folder_owner:
                return folder_owner[d]
            d = os.path.dirname(d)
        return None

    include = re.compile(r'^#include "([^"]+)"', re.M)
    checked = 0
    for name, t in sorted(targets.items()):
        if t["interface"]:
            continue
        allowed = closure(targets, name) | {name}
        files = [os.path.join(t["folder"], s) for s in t["sources"]]
        if folder_owner.get(t["folder"]) == name:  # its headers too
            base = os.path.join(ROOT, t["folder"])
            files += [os.path.relpath(os.path.join(dp, f), ROOT)
                      for dp, _, fs in os.walk(base) for f in fs if f.endswith(".h")
                      if owner_of(os.path.relpath(os.path.join(dp, f), ROOT)) == name]
        for rel in files:
            path = os.path.join(ROOT, rel)
            if not os.path.exists(path):
                continue
            for header in include.findall(open(path).read()):
                owner = owner_of(header)
                if owner is None or owner in allowed or header in HEADER_ONLY:
                    continue
                errors.append(f"{rel} ({name}) includes {header} of {owner}, which {name} "
                              f"does not link")
            checked += 1

    # 5. The rooms' table names files that are there.
    rooms = 0
    for cells in table_rows("| type (file) |"):
        for header in re.findall(r"\(([a-z_]+\.h)", cells[0]):
            rooms += 1
            if not any(os.path.exists(os.path.join(ROOT, "server", d, header))
                       for d in ("core", "store")):
                errors.append(f"the rooms' table names {header}, which is not in server/core or "
                              f"server/store")

    if errors:
        print("check-architecture: docs/architecture.md and the build disagree:", file=sys.stderr)
        for e in errors:
            print("  " + e, file=sys.stderr)
        return 1
    print(f"check-architecture: {len(targets)} targets as the table says, {checked} files "
          f"include only what their target links, {rooms} rooms' files are there")
    return 0


if __name__ == "__main__":
    sys.exit(main())
