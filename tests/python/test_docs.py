"""The documentation (issue 16): docs/ builds with `sphinx-build -W` (a docstring that is missing,
has no `>>>` example or does not parse is an error, docs/conf.py), every `>>>` example in it runs
as a doctest on the cpu backend, the README's (the guide's) complete Python examples run as
written (its Training example in test_train_digits.py), and every public name (em.*, em.nn,
em.nn.functional, em.nn.init, em.optim, em.data, em.random, em.ui, and the public members of
Tensor, Value, Program, Module, the optimizers and Window) is in the reference with a docstring
that starts with its signature and has an example. The builds write under <build>/docs, never
into docs/. Cold (empty kernel cache) the builds take about a minute on 2 cores, most of it
compiling the examples' kernels; with $EMBER_CACHE_DIR kept (tools/test) a few seconds."""
import inspect
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import ember as em

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
BUILD = Path(em.__file__).resolve().parents[2]  # <build>/python/ember/__init__.py
OUT = BUILD / "docs"

pytest.importorskip("sphinx", reason="the docs need Sphinx (Debian python3-sphinx; tools/bootstrap)")
pytest.importorskip("myst_parser", reason="the docs need myst-parser (Debian python3-myst-parser; tools/bootstrap)")

MODULES = {"ember.nn": em.nn, "ember.nn.functional": em.nn.functional, "ember.nn.init": em.nn.init,
           "ember.optim": em.optim, "ember.data": em.data, "ember.random": em.random, "ember.ui": em.ui}
CLASSES = {"ember.Tensor": em.Tensor, "ember.Value": em.Value, "ember.Var": em.Var, "ember.Program": em.Program,
           "ember.DType": em.DType, "ember.TensorType": em.TensorType, "ember.Window": em.Window,
           "ember.Window.Mouse": em.Window.Mouse, "ember.nn.Module": em.nn.Module,
           "ember.nn.Parameter": em.nn.Parameter, "ember.optim.Optimizer": em.optim.Optimizer,
           **{f"ember.optim.{n}": getattr(em.optim, n) for n in ("SGD", "Adam", "AdamW", "RMSprop")},
           **{f"ember.nn.{n}": getattr(em.nn, n) for n in ("Linear", "Conv2d", "Embedding", "LayerNorm",
                                                          "Sequential", "ReLU", "GELU", "Sigmoid", "SiLU",
                                                          "Softmax")}}
SUBMODULES = {"nn", "optim", "data", "random", "ui"}


def _members(qual, cls):
    """Public members defined on `cls` itself that do not override a base class's (documented there)."""
    out = {}
    for name, v in vars(cls).items():
        if name.startswith("_") or type(v).__name__ == "member_descriptor":  # __slots__ fields
            continue
        if any(name in vars(base) for base in cls.__mro__[1:] if base is not object):
            continue
        out[f"{qual}.{name}"] = getattr(cls, name) if not isinstance(v, property) else v
    return out


def public_names():
    """{qualified name: object} of every public name of `import ember as em`."""
    names = {}
    for n in dir(em):
        v = getattr(em, n)
        if n.startswith("_") or n in SUBMODULES or inspect.ismodule(v):
            continue
        names[f"ember.{n}"] = v
    for qual, mod in MODULES.items():
        for n in mod.__all__:
            v = getattr(mod, n)
            if not inspect.ismodule(v):
                names[f"{qual}.{n}"] = v
    for qual, cls in CLASSES.items():
        names.update(_members(qual, cls))
    return names


def _resolve(qual):
    """The object a documented dotted name refers to (None when it is not an attribute path)."""
    obj = em
    for part in qual.split(".")[1:]:
        obj = getattr(obj, part, None)
    return obj


# The doctests run in two processes (each compiles its pages' kernels), halving the cold time on
# 2 cores; the html build runs beside them. Every page is in one of the halves (checked below).
DOCTEST_HALVES = (["api/ops", "api/tensors", "api/autodiff", "api/random", "api/export", "api/errors", "index"],
                  ["api/control", "api/nn", "api/optim", "api/data", "api/program", "api/window", "guide",
                   "export"])


def _window_missing():
    """Why the window examples cannot run here (they render headless on OpenGL), or None."""
    from conftest import _unavailable
    if not getattr(em._ember, "window_built", False):
        return "this Ember was built without the window runtime"
    return _unavailable("opengl")


WINDOW_MISSING = _window_missing()


def _sphinx(builder, name=None, docs=None):
    """Runs sphinx-build -W with `builder` into <build>/docs/<name>, on the given documents (all when
    None); -E: every document is read again (an environment saved by a failed build would otherwise
    hide its warnings the next time)."""
    name = name or builder
    out, doctrees = OUT / name, OUT / f"doctrees-{name}"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(BUILD / "python"), os.environ.get("PYTHONPATH", "")]),
               EMBER_BUILD_DIR=str(BUILD))
    env.setdefault("EMBER_CACHE_DIR", str(BUILD / "kernel-cache"))
    cmd = [sys.executable, "-m", "sphinx", "-E", "-W", "--keep-going", "-q", "-b", builder, "-d", str(doctrees)]
    files = [str(DOCS / (d + (".md" if (DOCS / f"{d}.md").is_file() else ".rst"))) for d in docs or ()]
    r = subprocess.run(cmd + [str(DOCS), str(out)] + files, env=env, capture_output=True, text=True, timeout=600)
    return r, out


@pytest.fixture(scope="module")
def builds():
    """The html build and the two halves of the doctests, run side by side."""
    halves = [[d for d in h if d != "api/window" or not WINDOW_MISSING] for h in DOCTEST_HALVES]
    jobs = [("html", "html", None)] + [("doctest", f"doctest-{k}", h) for k, h in enumerate(halves)]
    with ThreadPoolExecutor(len(jobs)) as ex:
        results = list(ex.map(lambda j: _sphinx(*j), jobs))
    return {"html": results[0], "doctest": results[1:]}


def test_html_builds_without_warnings(builds):
    r, out = builds["html"]
    assert r.returncode == 0, f"sphinx-build -W -b html failed:\n{r.stdout[-6000:]}\n{r.stderr[-6000:]}"
    assert (out / "index.html").is_file() and (out / "api" / "ops.html").is_file()
    assert not any(p.suffix == ".html" or p.name == "_build" for p in DOCS.rglob("*")), "a build wrote into docs/"
    pages = {str(p.relative_to(DOCS).with_suffix("")) for p in DOCS.rglob("*") if p.suffix in (".rst", ".md")}
    assert pages == {d for h in DOCTEST_HALVES for d in h}, "a docs page is in neither doctest half"


def test_every_example_runs(builds):
    if WINDOW_MISSING:
        print(f"the examples of docs/api/window.rst do not run here: {WINDOW_MISSING}")
    total = 0
    for r, out in builds["doctest"]:
        report = (out / "output.txt").read_text() if (out / "output.txt").is_file() else ""
        assert r.returncode == 0, f"doctests failed:\n{report[-8000:]}\n{r.stderr[-4000:]}"
        m = re.search(r"Doctest summary\n=+\n\s*(\d+) tests", report)
        assert m and "0 failures in tests" in report and "0 failures in setup code" in report, report[-2000:]
        total += int(m.group(1))
    assert total >= len(public_names())  # examples (>>> lines) run: 772 when this was written


def test_every_public_name_is_documented(builds):
    r, out = builds["html"]
    assert r.returncode == 0
    from sphinx.util.inventory import InventoryFile
    with open(out / "objects.inv", "rb") as f:
        inv = InventoryFile.load(f, "", lambda a, b: b)
    documented = {name for kind, entries in inv.items() if kind.startswith("py:") for name in entries}
    names = public_names()
    assert len(names) > 250
    # A re-export (em.nn.relu is em.nn.functional.relu) counts as documented where its object is.
    documented_ids = {id(_resolve(n)) for n in documented if n.startswith("ember.")}
    missing = sorted(n for n, v in names.items() if n not in documented and id(v) not in documented_ids)
    assert not missing, f"public names not in the API reference (docs/api/*.rst): {missing}"
    bad = []
    for qual, obj in names.items():
        doc = inspect.getdoc(obj) or ""
        short = qual.rsplit(".", 1)[1]
        if isinstance(obj, type) and issubclass(obj, BaseException):
            ok = bool(doc)
        elif isinstance(obj, em.DType):
            ok = True  # data: documented in docs/api/program.rst with an example
        elif isinstance(obj, property) or type(obj).__name__ == "property" or obj is em.Tensor:
            ok = ">>>" in doc  # no signature: a property, or em.Tensor (no constructor: em.tensor makes one)
        else:
            ok = ">>>" in doc and doc.split("\n", 1)[0].startswith(short + "(")
        if not ok:
            bad.append(qual)
    assert not bad, f"docstrings without a signature line `name(...)` or a `>>>` example: {bad}"


def _readme_block(heading):
    """The first ```python block of README.md's section `heading`."""
    text = (REPO / "README.md").read_text()
    section = text[text.index(f"\n{heading}\n"):]
    section = section[:section.index("\n## ", 1)]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_examples_run(tmp_path):
    """The guide's complete examples, as written: the N-body step, then reading its IR, source and
    stats and exporting it (these two reuse `step`), and the gradient example (called here)."""
    script = "\n".join([_readme_block("## Example"), _readme_block("## Reading generated code and the IR"),
                        _readme_block("## Export to engines"), _readme_block("## Gradients"),
                        "g = energy_grad(np.random.default_rng(0).random((16, 3), np.float32)).numpy()",
                        "assert g.shape == (16, 3) and np.isfinite(g).all() and np.abs(g).max() > 0",
                        "print('README examples ran')"])
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    env.setdefault("EMBER_CACHE_DIR", str(BUILD / "kernel-cache"))
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and "README examples ran" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Generated by Ember" in r.stdout or "ember_" in r.stdout  # the printed C++ source
    assert (tmp_path / "out" / "nbody" / "manifest.json").is_file()
    assert any(p.suffix == ".hlsl" for p in (tmp_path / "out" / "nbody-hlsl").iterdir())
