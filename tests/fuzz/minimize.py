"""Shrinks a failing program while it keeps failing the same way (same class, place and error
site: run.signature). The program is regenerated from a shrunk list of the generator's recorded
choices (0 = the simplest option everywhere: fewer parts, leaves instead of subtrees, dims of
1, constant loop counts...) and a set of dropped outputs, so every candidate is a valid program
with its own reference. Candidates run in a worker subprocess (crashes and hangs are results)."""
import time

from . import gen, run


def minimize(seed, fail, backends, worker=None, budget_s=240.0, timeout=60.0, log=None, grad=False):
    """(program, failure, best) of the smallest program found that fails like `fail` (grad: a
    program of the gradient mode, kept failing the same way: a gradient mismatch stays one)."""
    want = run.signature(fail)
    where = fail["where"]
    bks = [where] if where in backends else []
    stages = where.startswith("interp") or where == "generator"
    own = worker is None
    worker = worker or run.Worker()
    t0 = time.time()
    prog = gen.generate(seed, grad=grad)
    best = {"choices": list(prog.choices), "drop": []}
    best_fail = fail
    tried = set()

    def fails_same(cand):
        key = (tuple(cand["choices"]), tuple(sorted(cand["drop"])))
        if key in tried:
            return None
        tried.add(key)
        r = run.run_seed(worker, {"seed": seed, "backends": bks, "stages": stages, "choices": cand["choices"],
                                  "drop": cand["drop"], "grad": grad}, timeout)
        for f in r["fails"]:
            if run.signature(f) == want:
                return f
        return None

    def attempt(cand):
        nonlocal best, best_fail
        if time.time() - t0 > budget_s:
            return False
        f = fails_same(cand)
        if f:
            best, best_fail = cand, f
            log and log(f"  shrunk: {len(cand['choices'])} choices, {len(cand['drop'])} outputs dropped")
            return True
        return False
    try:
        changed = True
        while changed and time.time() - t0 < budget_s:
            changed = False
            # drop outputs one at a time
            nout = len(gen.generate(seed, best["choices"], best["drop"], grad=grad).outs) + len(best["drop"])
            for k in range(nout):
                if k not in best["drop"] and attempt({"choices": best["choices"], "drop": best["drop"] + [k]}):
                    changed = True
            # delete chunks of choices (from the end: later parts first)
            for size in (32, 16, 8, 4, 2, 1):
                i = len(best["choices"]) - size
                while i >= 0:
                    ch = best["choices"]
                    if attempt({"choices": ch[:i] + ch[i + size:], "drop": best["drop"]}):
                        changed = True
                    i -= size
            # make choices smaller
            for i in range(len(best["choices"])):
                v = best["choices"][i] if i < len(best["choices"]) else 0
                for nv in sorted({0, v // 2, v - 1}):
                    if 0 <= nv < v:
                        ch = list(best["choices"])
                        ch[i] = nv
                        if attempt({"choices": ch, "drop": best["drop"]}):
                            changed = True
                            break
    finally:
        if own:
            worker.stop()
    return gen.generate(seed, best["choices"], best["drop"], grad=grad), best_fail, best
