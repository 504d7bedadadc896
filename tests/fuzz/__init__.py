"""Ember's differential fuzzer (issue 10): a seeded random program generator (gen.py), a runner
that compares the reference interpreter after every pass and every backend with a NumPy
reference (run.py), a minimizer (minimize.py) and the command line (tools/fuzz, cli.py)."""
