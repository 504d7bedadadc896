from . import functional, init  # noqa: F401
