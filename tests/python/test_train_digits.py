"""examples/train_digits.py and em.data: minibatches gathered inside the program (against NumPy,
every backend), a training loop that copies nothing per step (the same em.Tensors every call,
only the seed scalar changes), the loss falling for the MLP and the CNN, the MLP reaching 95%
test accuracy in well under a minute on cpu, learning rate and batch size changed without
recompiling, the live window against a golden screenshot (headless and under Xvfb), the script,
and the README's training example."""
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import ember as em
from test_examples import EXAMPLES, example
from test_demos import _child_env, _compare_golden, needs_window, windowed_run_pixels

README = Path(__file__).resolve().parents[2] / "README.md"


def td():
    return example("train_digits")


# em.data ------------------------------------------------------------------------------------------

@em.compile
def _random_rows(X: em.f32["N", 3], y: em.i32["N"], seed: em.i32, batch: em.i32):  # noqa: F821
    xb, yb = em.data.random_batch(batch, seed, X, y)
    return xb, yb, em.random.randint((batch,), seed, 0, X.shape[0])


@em.compile
def _epoch_rows(X: em.f32["N", 3], perm: em.i32["N"], step: em.i32, batch: em.i32):  # noqa: F821
    return em.data.epoch_batch(perm, step, batch, X)


def test_batches_gather_rows_on_the_device(backend, rng):
    X = rng.standard_normal((50, 3)).astype(np.float32)
    y = np.arange(50, dtype=np.int32)
    for seed, batch in ((0, 16), (7, 5)):
        xb, yb, idx = (t.numpy() for t in _random_rows(X, y, seed, batch))
        assert idx.shape == (batch,) and idx.min() >= 0 and idx.max() < 50
        np.testing.assert_array_equal(yb, idx)
        np.testing.assert_array_equal(xb, X[idx])
    a, b = (_random_rows(X, y, s, 16)[1].numpy() for s in (1, 2))
    assert not np.array_equal(a, b)  # another seed, another batch
    perm = em.data.permutation(50, seed=3)
    p = perm.numpy()
    assert sorted(p.tolist()) == list(range(50))
    for step in (0, 3):  # batch 3 wraps around the end of the permutation
        got = _epoch_rows(X, perm, step, 16).numpy()
        np.testing.assert_array_equal(got, X[p[(step * 16 + np.arange(16)) % 50]])


def test_training_loop_copies_nothing_per_step(monkeypatch):
    """Each call gets the same em.Tensor objects (dataset, parameters, optimizer state: updated in
    place) and the same scalars but the seed; nothing goes through NumPy in the loop."""
    tr = td().Trainer("mlp")
    tr.step()  # compile outside the counted loop
    prog = tr.progs.train
    calls, copies = [], []
    def recording(real):  # the run arguments of each call, from whichever path made them
        def record(self, *a, **k):
            out = real(self, *a, **k)
            if self is prog and out is not None:
                calls.append(list(out))
            return out
        return record

    import ember._program as P
    real_from_numpy, real_numpy = P.from_numpy_arg, em.Tensor.numpy
    monkeypatch.setattr(type(prog), "_arguments", recording(type(prog)._arguments))
    monkeypatch.setattr(type(prog), "_rerun_arguments", recording(type(prog)._rerun_arguments))
    monkeypatch.setattr(P, "from_numpy_arg", lambda *a: copies.append("upload") or real_from_numpy(*a))
    monkeypatch.setattr(em.Tensor, "numpy", lambda self: copies.append("download") or real_numpy(self))
    dataset = tr.X
    for _ in range(8):
        tr.step()
    monkeypatch.undo()
    assert copies == [] and len(calls) == 8 and tr.X is dataset
    first = calls[0]
    tensors = [k for k, v in enumerate(first) if isinstance(v, em.Tensor)]
    assert len(tensors) == 4 + 2 * 4 + 1 + 2  # parameters, Adam's moments, step counter, X, y
    assert any(v is dataset for v in first)
    changing = set()
    for c in calls[1:]:
        assert all(c[k] is first[k] for k in tensors)
        changing |= {k for k, v in enumerate(c) if k not in tensors and v != first[k]}
    assert len(changing) == 1  # the seed (the step number)
    assert [c[min(changing)] for c in calls] == [first[min(changing)] + k for k in range(8)]


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_loss_falls(model):
    tr = td().Trainer(model, lr=3e-3)
    losses = [float(tr.step()) for _ in range(40)]
    assert np.mean(losses[-5:]) < 0.6 * np.mean(losses[:5]), losses
    assert tr.opt.step_count == 40


def test_mlp_reaches_95_percent_in_under_a_minute():
    t0 = time.perf_counter()
    acc, seconds, tr = td().train("mlp", steps=250, lr=5e-3, quiet=True)
    total = time.perf_counter() - t0
    print(f"digits MLP: {100 * acc:.1f}% after 250 steps, {seconds:.1f} s training, {total:.1f} s in all")
    assert acc >= 0.95, acc
    assert total < 60, total


def test_lr_and_batch_size_are_runtime_scalars():
    tr = td().Trainer("mlp")
    tr.step()
    compiled = dict(tr.progs.train._compiled)
    w = tr.model.fc1.weight.numpy()
    tr.opt.lr = 0.0
    tr.batch = 17
    tr.step()
    np.testing.assert_array_equal(tr.model.fc1.weight.numpy(), w)  # lr 0: nothing moves
    tr.opt.lr, tr.batch = 1e-2, 128
    tr.step()
    assert np.abs(tr.model.fc1.weight.numpy() - w).max() > 1e-4
    assert tr.progs.train._compiled == compiled  # the same compiled program throughout


# The window ---------------------------------------------------------------------------------------

SIZE, FRAMES = (960, 540), 4


def _run(headless, model="mlp"):
    """Trains in a new window for FRAMES frames (the timing text off, the test accuracy every
    frame); returns (pixels, state)."""
    d = td()
    s = d.make_state(SimpleNamespace(model=model))
    s.timing, s.eval_every = False, 1
    with em.Window(*SIZE, "digits", headless=headless, vsync=False, frames=FRAMES, overlay=False) as win:
        while win.frame():
            d.frame(win, s)
        px = win.pixels()
    return px, s


@needs_window
def test_window_renders_headless_like_its_golden():
    px, s = _run(headless=True)
    assert s.tr.steps == FRAMES * 5 and len(s.losses) == len(s.accs) == FRAMES
    assert s.losses[-1] < s.losses[0] and s.accs[-1] > s.accs[0]
    img = s.image.numpy()
    assert img.shape == (270, 480, 3)
    digits = img[146:230, 224:448]
    assert (digits[..., 1] > 0.8).any() or (digits[..., 0] > 0.8).any()  # right or wrong marks
    _compare_golden("train_digits", px)


@needs_window
def test_window_renders_on_screen_like_its_golden(xvfb_display, tmp_path):
    _compare_golden("train_digits", windowed_run_pixels("test_train_digits", xvfb_display, tmp_path, timeout=600))


# The script and the README ------------------------------------------------------------------------

def _script(*args):
    return subprocess.run([sys.executable, str(EXAMPLES / "train_digits.py"), *args], env=_child_env(),
                          capture_output=True, text=True, timeout=600)


def test_script_trains_and_reports_accuracy():
    proc = _script("--model", "cnn", "--steps", "30")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"cnn: 30 steps \(batch 64\) .* test accuracy \d+\.\d%", proc.stdout), proc.stdout


@needs_window
def test_script_window_headless_writes_frames(tmp_path):
    out = tmp_path / "frames"
    proc = _script("--window", "--headless", "--frames", "2", "--out", str(out), "--width", "480", "--height", "270")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == str(out) and len(list(out.glob("*.png"))) == 2


def test_readme_training_example_runs(tmp_path):
    """The Python block of README.md's "Training" section, run as written."""
    text = README.read_text()
    section = text[text.index("\n## Training"):]
    section = section[:section.index("\n## ", 1)]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    env = dict(_child_env(), PYTHONPATH=os.pathsep.join([str(Path(em.__file__).resolve().parents[1])]))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    acc = float(re.search(r"test accuracy ([0-9.]+)", proc.stdout).group(1))
    assert acc >= 0.95, proc.stdout  # 95.8% (every 5th image held out, 300 steps)


def test_batch_helpers_need_a_trace_and_tensors():
    with pytest.raises(em.Error, match="inside a function compiled with @em.compile"):
        em.data.random_batch(4, 0, np.zeros((8, 2), np.float32))

    @em.compile
    def no_tensors(seed: em.i32):
        return em.data.random_batch(4, seed)
    with pytest.raises(em.TypeError, match="em.data.random_batch: give at least one tensor"):
        no_tensors(0)
