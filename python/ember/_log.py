"""Ember's log: Python's `logging` under the `ember` logger, for the Python package and the C++
runtime alike (compile timings, device choices, compile-cache warnings).

EMBER_LOG=debug|info|warning|error sets the logger's level at import (as before: EMBER_LOG=info
prints one line per compiled program). Until the application configures logging itself (a
handler on the root logger), Ember's records go to stderr as "ember: <message>" (warnings as
"ember: warning: <message>"); once it does, they propagate to its handlers only:

    import logging
    logging.basicConfig(level=logging.INFO)   # or logging.getLogger("ember").setLevel(logging.INFO)
"""
import atexit
import logging
import os
import sys

from . import _ember as _C

logger = logging.getLogger("ember")

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


class _StderrHandler(logging.Handler):
    """Ember's default output: sys.stderr at the time of the record, in the C++ runtime's format.
    Silent once the root logger has handlers (the application's logging takes over)."""

    def emit(self, record):
        if logging.getLogger().handlers:
            return
        try:
            tag = "error: " if record.levelno >= logging.ERROR else "warning: " if record.levelno >= logging.WARNING else ""
            sys.stderr.write(f"ember: {tag}{record.getMessage()}\n")
        except Exception:  # noqa: BLE001  (logging's own rule: a handler never raises)
            self.handleError(record)


def _level_from_env():
    """The level EMBER_LOG asks for, or None (unset); a bad value is reported and ignored."""
    v = os.environ.get("EMBER_LOG", "").strip().lower()
    if not v:
        return None
    if v in _LEVELS:
        return _LEVELS[v]
    sys.stderr.write(f"ember: warning: EMBER_LOG={v!r} is not one of {', '.join(_LEVELS)}; ignored\n")
    return None


def _setup():
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        logger.addHandler(_StderrHandler())
    level = _level_from_env()
    if level is not None:
        logger.setLevel(level)
    _C._set_log_sink(logger)
    atexit.register(_C._set_log_sink, None)  # C++ may log while Python shuts down: stderr then


_setup()
