"""`python3 -m ember export FILE:FUNCTION --target T [--engine E] --out DIR [--dim N=4096]`: exports a
compiled function of a Python file (docs/export.md)."""
import argparse
import importlib.util
import os
import sys

import ember as em


def _load_program(spec):
    """The em.Program FUNCTION of FILE (a plain annotated function is compiled)."""
    path, sep, func = spec.rpartition(":")
    if not sep or not path or not func:
        raise em.Error(f"expected FILE:FUNCTION, got {spec!r}")
    if not os.path.isfile(path):
        raise em.Error(f"no such file: {path}")
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    name = "_ember_export_" + os.path.splitext(os.path.basename(path))[0]
    mod_spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(mod_spec)
    sys.modules[name] = mod
    mod_spec.loader.exec_module(mod)
    fn = getattr(mod, func, None)
    if fn is None:
        raise em.Error(f"{path} has no function {func!r}")
    return fn if isinstance(fn, em.Program) else em.compile(fn)


def _export(argv):
    p = argparse.ArgumentParser(prog="python3 -m ember export", description="Export a compiled function's kernels "
                                "and manifest.json (docs/export.md).")
    p.add_argument("function", metavar="FILE:FUNCTION")
    p.add_argument("--target", required=True, help="spirv, glsl, hlsl or cpp")
    p.add_argument("--engine", default=None, help="unity or godot (engine glue)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE",
                   help="a value for a symbolic dim, fixed only where the plan needs it")
    a = p.parse_args(argv)
    dims = {}
    for d in a.dim:
        k, sep, v = d.partition("=")
        if not sep or not k or not v.lstrip("-").isdigit():
            p.error(f"--dim expects NAME=INTEGER, got {d!r}")
        dims[k] = int(v)
    prog = _load_program(a.function)
    m = em.export(prog, a.out, a.target, engine=a.engine, dims=dims)
    print(f"exported {m['program']} ({a.target}): {len(m['kernels'])} kernel(s), {len(m['buffers'])} buffer(s) "
          f"-> {a.out}/manifest.json")


def main(argv=None):
    """Dispatches `python3 -m ember <command>`."""
    argv = sys.argv[1:] if argv is None else argv
    commands = {"export": _export}
    if not argv or argv[0] not in commands:
        print("usage: python3 -m ember export FILE:FUNCTION --target T [--engine E] --out DIR [--dim N=4096]",
              file=sys.stderr)
        return 2
    try:
        commands[argv[0]](argv[1:])
    except em.Error as e:
        print(f"ember: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
