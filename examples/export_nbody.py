"""Exports the N-body step of nbody.py for game engines: a Unity folder (from the `hlsl` target) and a
Godot 4 project (from the `spirv` target), each with a sample scene that steps the simulation.

Usage: /usr/bin/python3 examples/export_nbody.py [--out out/nbody-export]
Writes OUT/hlsl (the export; OUT/hlsl/unity: copy into a Unity project's Assets) and OUT/spirv (the
export; OUT/spirv/godot: open as a Godot 4 project). README "Export to engines" says how to load each.
"""
import argparse
import os

from _ember_path import em  # ember from the build tree (or an installed copy)
from nbody import step


def export_engines(out):
    """Writes both engine exports of the N-body step under `out`; returns {engine: [files]}."""
    written = {}
    for target, engine in (("hlsl", "unity"), ("spirv", "godot")):
        d = os.path.join(out, target)
        em.export(step, d, target, engine=engine)
        root = os.path.join(d, engine)
        written[engine] = sorted(os.path.relpath(os.path.join(r, f), root) for r, _, fs in os.walk(root) for f in fs)
    return written


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join("out", "nbody-export"))
    a = p.parse_args()
    for engine, files in export_engines(a.out).items():
        target = "hlsl" if engine == "unity" else "spirv"
        print(f"{engine}: {os.path.join(a.out, target, engine)}: {', '.join(files)}")


if __name__ == "__main__":
    main()
