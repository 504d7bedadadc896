"""`python3 -m ember COMMAND` (or `ember COMMAND` after pip install): Ember's command line.

    info                  version, built backends, each backend's device (or why it has none),
                          the compile cache's directory and size
    cache ls | clear      the compile cache's entries (by kind), or remove them
    demo NAME [ARGS...]   an interactive example (fluid, nbody, mandelbrot, raymarch)
    export FILE:FUNCTION --target T [--engine E] --out DIR [--dim N=4096]
                          a compiled function's kernels and manifest.json (docs/export.md)

Each command takes --help.
"""
import argparse
import importlib.util
import os
import runpy
import sys

import ember as em
from . import _ember as _C

# Cache entry kinds by key prefix (backends/*: the compile, program and trace caches).
_KINDS = {"cpu": "cpu libraries", "cpuk": "cpu kernel references", "vk": "vulkan pipelines", "gl": "opengl programs",
          "prog": "compiled programs", "trace": "traces"}


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


def _size(n):
    """A byte count for people (1.5 MiB)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _cache_files():
    """(directory, [(name, bytes)]) of the compile cache: its regular files only (a tool's directory
    kept there, such as tools-venv, is not a cache entry)."""
    d = _C._cache_dir()
    files = []
    with os.scandir(d) as it:
        for e in it:
            if e.is_file(follow_symlinks=False):
                files.append((e.name, e.stat(follow_symlinks=False).st_size))
    return d, sorted(files)


def _kind(name):
    prefix = name.split("-", 1)[0] if "-" in name else ""
    return prefix if prefix in _KINDS else "other"


def _info(argv):
    p = argparse.ArgumentParser(prog="python3 -m ember info", description="Ember's version, the backends built "
                                "into it, the device each runs on here (or why it cannot run), and the compile "
                                "cache's directory and size.")
    p.parse_args(argv)
    print(f"ember {em.__version__} ({os.path.dirname(os.path.abspath(em.__file__))})")
    print(f"python {sys.version.split()[0]}, numpy {__import__('numpy').__version__}")
    built = list(_C.built_backends())
    print(f"built backends: {', '.join(built)}")
    missing = [b for b in ("cpu", "vulkan", "opengl", "cuda") if b not in built]
    for b in built:
        reason = _C.backend_unavailable(b)
        if reason:
            print(f"  {b:<12} no device: {reason}")
        else:
            try:
                print(f"  {b:<12} {_C.device_info(b)}")
            except em.Error as e:
                print(f"  {b:<12} no device: {e}")
    for b in missing:
        print(f"  {b:<12} not built into this Ember")
    try:
        auto = _C.resolve_backend("auto")
    except em.Error as e:
        auto = f"none ({e})"
    print(f"auto backend: {auto}")
    d, files = _cache_files()
    print(f"compile cache: {d} ({len(files)} files, {_size(sum(s for _, s in files))})"
          + ("" if os.environ.get("EMBER_CACHE_DIR") else "; set EMBER_CACHE_DIR to move it"))


def _cache(argv):
    p = argparse.ArgumentParser(prog="python3 -m ember cache", description="The compile cache (EMBER_CACHE_DIR, "
                                "default ~/.cache/ember): compiled kernels, programs and traces, reused by later "
                                "processes.")
    sub = p.add_subparsers(dest="action", required=True, metavar="{ls,clear}")
    ls = sub.add_parser("ls", help="list the entries by kind, with their sizes",
                        description="List the compile cache's entries by kind, with their sizes.")
    ls.add_argument("--all", action="store_true", help="also list every file")
    sub.add_parser("clear", help="remove every entry (the next compile of each program starts afresh)",
                   description="Remove every file of the compile cache (directories kept there are left alone).")
    a = p.parse_args(argv)
    d, files = _cache_files()
    if a.action == "clear":
        removed = 0
        for name, size in files:
            try:
                os.unlink(os.path.join(d, name))
                removed += size
            except FileNotFoundError:  # another process removed it first
                pass
        print(f"removed {len(files)} files ({_size(removed)}) from {d}")
        return
    print(f"{d}: {len(files)} files, {_size(sum(s for _, s in files))}")
    kinds = {}
    for name, size in files:
        n, b = kinds.get(_kind(name), (0, 0))
        kinds[_kind(name)] = (n + 1, b + size)
    for k in sorted(kinds):
        n, b = kinds[k]
        print(f"  {_KINDS.get(k, 'other files'):<24} {n:>6} files  {_size(b):>10}")
    if a.all:
        for name, size in files:
            print(f"  {name}  {_size(size)}")


def _examples_dir():
    """The interactive examples shipped with the package (ember/examples: copied there by the build)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "examples")


def _demos():
    d = _examples_dir()
    if not os.path.isdir(d):
        return {}
    return {f[5:-3]: os.path.join(d, f) for f in sorted(os.listdir(d))
            if f.startswith("demo_") and f.endswith(".py") and f != "demo_common.py"}


def _demo(argv):
    demos = _demos()
    p = argparse.ArgumentParser(prog="python3 -m ember demo", description="Run an interactive example: a window "
                                "with widgets (headless, writing PNG frames, when there is no display). Options "
                                "after NAME go to the demo (python3 -m ember demo fluid --help).")
    p.add_argument("name", metavar="NAME", help="one of: " + (", ".join(demos) or "(none found)"))
    p.add_argument("args", nargs=argparse.REMAINDER, help="the demo's own options")
    a = p.parse_args(argv[:1] if argv and argv[0] not in ("-h", "--help") else argv)
    if a.name not in demos:
        raise em.Error(f"no demo named {a.name!r}; expected one of: {', '.join(demos) or '(none found in ' + _examples_dir() + ')'}")
    path = demos[a.name]
    sys.path.insert(0, os.path.dirname(path))
    sys.argv = [path] + argv[1:]  # (run_path sets argv[0] to the path anyway)
    runpy.run_path(path, run_name="__main__")


COMMANDS = {"info": _info, "cache": _cache, "demo": _demo, "export": _export}


def main(argv=None):
    """Dispatches `python3 -m ember <command>`; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if not argv or argv[0] not in COMMANDS:
        print(f"usage: python3 -m ember {{{','.join(COMMANDS)}}} ... (--help for each)", file=sys.stderr)
        if argv:
            print(f"ember: unknown command {argv[0]!r}", file=sys.stderr)
        return 2
    try:
        COMMANDS[argv[0]](argv[1:])
    except em.Error as e:
        print(f"ember: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
