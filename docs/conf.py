"""Sphinx configuration of Ember's documentation: the API reference from the docstrings
(autodoc), the README's guides (myst-parser) and docs/export.md. Build (outputs go under the
build directory, never into docs/):

    PYTHONPATH=build/python sphinx-build -W -b html docs build/docs/html
    PYTHONPATH=build/python sphinx-build -W -b doctest docs build/docs/doctest

tests/python/test_docs.py runs both. With -W a docstring that is missing, has no example, or does
not parse is an error (see _check_docstring below)."""
import os
import sys
from pathlib import Path

_DOCS = Path(__file__).resolve().parent
_BUILD = Path(os.environ.get("EMBER_BUILD_DIR") or _DOCS.parent / "build")
if (_BUILD / "python" / "ember").is_dir():
    sys.path.insert(0, str(_BUILD / "python"))

import ember  # noqa: E402

project = "Ember"
author = "the Ember authors"
copyright = "the Ember authors"
release = version = ember.__version__

extensions = ["sphinx.ext.autodoc", "sphinx.ext.doctest", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = []
root_doc = "index"
html_theme = "alabaster"
html_static_path = []
html_theme_options = {"nosidebar": False, "page_width": "1100px"}

# Signatures come from the first docstring line ("name(args) -> result"), which help() shows too.
autodoc_docstring_signature = True
autodoc_member_order = "bysource"
autodoc_typehints = "none"
add_module_names = True
# Markdown pages: README headings become link targets; local links to files outside docs/ are
# shown as plain links (myst cannot resolve them as documents).
myst_heading_anchors = 3
suppress_warnings = ["ref.myst"]

# Every docstring example runs: the doctest builder executes each `>>>` block with these names.
doctest_global_setup = """
import numpy as np
import ember as em
em.init("cpu")
"""
doctest_test_doctest_blocks = "default"
trim_doctest_flags = True


def _check_docstring(app, what, name, obj, options, lines):
    """A documented public object needs a docstring with a `>>>` example (modules and
    exceptions need only the docstring): otherwise a warning, an error under -W."""
    from sphinx.util import logging
    log = logging.getLogger("ember.docs")
    text = "\n".join(lines).strip()
    if not text:
        log.warning(f"{name}: no docstring")
    elif what not in ("module", "exception", "data", "attribute") and ">>>" not in text:
        log.warning(f"{name}: the docstring has no `>>>` example")


def setup(app):
    app.connect("autodoc-process-docstring", _check_docstring)
