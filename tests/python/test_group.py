"""Workgroups: em.kernel(shape, group=...), em.group_buffer, em.barrier, em.local_index and
em.group_index against NumPy on random inputs (the C++ tests in tests/cpp/test_group.cpp also
compare every program with the phase-by-phase interpreter), and the user errors."""
import sys

import numpy as np
import pytest

import ember as em
from conftest import _SELECTED, _unavailable

G = 256


def line_of_next_statement():
    """The caller's line + 1: where a traced call on the following line reports its error."""
    return sys._getframe(1).f_lineno + 1


@em.compile
def block_sum(X: em.f32["N"]):
    n = X.shape[0]
    out = em.zeros(((n + G - 1) // G,), em.f32)
    with em.kernel(n, group=G) as i:
        buf = em.group_buffer(G, em.f32)
        l = em.local_index()
        buf[l] = X[i]
        em.barrier()
        with em.loop(8) as k:  # s = 128, 64, ..., 1: the same on every thread
            s = (G // 2) >> k
            with em.if_((l < s) & (i + s < n)):  # threads past N never wrote their slot
                buf[l] = buf[l] + buf[l + s]
            em.barrier()
        with em.if_(l == 0):
            out[em.group_index()] = buf[0]
    return out


@pytest.mark.parametrize("n", [1000, 1024, 4096 + 7, 3])
def test_block_reduction(rng, n):
    x = rng.uniform(-1, 1, n).astype(np.float32)
    got = block_sum(x).numpy()
    padded = np.zeros(-(-n // G) * G, np.float32)
    padded[:n] = x
    np.testing.assert_allclose(got, padded.reshape(-1, G).sum(axis=1), rtol=1e-4, atol=1e-5)


def test_block_reduction_program_shape():
    em.init(backend="cpu")  # the GPU backends keep the barriers (test_gpu_backends_run_groups_natively)
    traced = block_sum.ir("traced")
    assert "group(256)" in traced and "barrier" in traced and "group_buffer f32[256]" in traced
    assert block_sum.kernel_count == 1
    assert "barrier" not in block_sum.ir("final")  # the CPU runs a group per thread
    src = block_sum.source("cpp")
    assert "alignas(64) float g0[256]" in src


T = 16


@em.compile
def tiled_matmul(A: em.f32["M", "K"], B: em.f32["K", "N"]):
    m, k, n = A.shape[0], A.shape[1], B.shape[1]
    C = em.zeros((m, n), em.f32)
    tiles = (k + T - 1) // T
    with em.kernel(((m + T - 1) // T * T, (n + T - 1) // T * T), group=(T, T)) as (i, j):
        As = em.group_buffer((T, T), em.f32)
        Bs = em.group_buffer((T, T), em.f32)
        li, lj = em.local_index()
        acc = em.var(0.0)
        with em.loop(tiles) as t:
            ka = t * T + lj
            kb = t * T + li
            As[li, lj] = em.where(ka < k, A[i, ka], 0.0)
            Bs[li, lj] = em.where(kb < k, B[kb, j], 0.0)
            em.barrier()
            with em.loop(T) as q:
                acc.val += As[li, q] * Bs[q, lj]
            em.barrier()
        with em.if_((i < m) & (j < n)):
            C[i, j] = acc
    return C


@pytest.mark.parametrize("mkn", [(50, 37, 45), (32, 16, 64)], ids=str)
def test_tiled_matmul(rng, mkn):
    m, k, n = mkn
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    np.testing.assert_allclose(tiled_matmul(a, b).numpy(), a @ b, rtol=1e-4, atol=1e-5)


S = 64


@em.compile
def stencil(X: em.f32["N"]):
    n = X.shape[0]
    Y = em.zeros((n,), em.f32)
    with em.kernel(n, group=S) as i:
        buf = em.group_buffer(S + 2, em.f32)  # the group's elements and one halo element per side
        l = em.local_index()
        c = X[i]
        buf[l + 1] = c
        with em.if_(l == 0):
            buf[0] = X[i - 1]  # clamped at the left edge
        with em.if_((l == S - 1) | (i == n - 1)):
            buf[l + 2] = X[i + 1]  # clamped at the right edge
        em.barrier()
        Y[i] = 0.25 * buf[l] + 0.5 * c + 0.25 * buf[l + 2]
    return Y


@pytest.mark.parametrize("n", [300, 64, 1])
def test_stencil_with_halo(rng, n):
    x = rng.uniform(-1, 1, n).astype(np.float32)
    p = np.pad(x, 1, mode="edge")
    want = np.float32(0.25) * p[:-2] + np.float32(0.5) * x + np.float32(0.25) * p[2:]
    np.testing.assert_allclose(stencil(x).numpy(), want, rtol=1e-5, atol=1e-6)


def test_group_and_local_index_2d():
    @em.compile
    def coords(X: em.f32["H", "W"]):
        h, w = X.shape
        L = em.zeros((h, w, 2), em.i32)
        Gr = em.zeros((h, w, 2), em.i32)
        with em.kernel((h, w), group=(4, 8)) as (i, j):
            li, lj = em.local_index()
            gi, gj = em.group_index()
            L[i, j, 0] = li
            L[i, j, 1] = lj
            Gr[i, j, 0] = gi
            Gr[i, j, 1] = gj
        return L, Gr
    L, Gr = coords(np.zeros((10, 21), np.float32))
    i, j = np.meshgrid(np.arange(10), np.arange(21), indexing="ij")
    np.testing.assert_array_equal(L.numpy(), np.stack([i % 4, j % 8], axis=-1))
    np.testing.assert_array_equal(Gr.numpy(), np.stack([i // 4, j // 8], axis=-1))


def test_group_histogram_with_atomics(rng):
    @em.compile
    def hist(X: em.i32["N"]):
        n = X.shape[0]
        out = em.zeros(((n + 127) // 128, 8), em.i32)
        with em.kernel(n, group=128) as i:
            bins = em.group_buffer(8, em.i32)
            l = em.local_index()
            em.atomic_add(bins[X[i] & 7], 1)
            em.barrier()
            with em.if_(l < 8):
                out[em.group_index(), l] = bins[l]
        return out
    x = rng.integers(0, 1000, 500).astype(np.int32)
    got = hist(x).numpy()
    padded = np.full(512, -1)
    padded[:500] = x & 7
    want = np.stack([(padded.reshape(-1, 128) == b).sum(axis=1) for b in range(8)], axis=1)
    np.testing.assert_array_equal(got, want)


def test_barriers_in_nested_uniform_loops_and_if_else(rng):
    """Barriers inside uniform loops (a short one the compiler unrolls) inside a uniform if/else;
    a var carried across all of them."""
    @em.compile
    def f(X: em.i32["N"]):
        n = X.shape[0]
        Y = em.zeros((n,), em.i32)
        with em.kernel(n, group=16) as i:
            buf = em.group_buffer(16, em.i32)
            l = em.local_index()
            v = em.var(X[i])
            with em.if_(em.group_index() % 2 == 0):
                with em.loop(2) as a:
                    with em.loop(3) as b:
                        buf[l] = v
                        em.barrier()
                        v.val = v + buf[(l + 1) % 16] * (a + b)
                        em.barrier()
            with em.else_():
                buf[l] = v * 3
                em.barrier()
                v.val = buf[15 - l]
            Y[i] = v
        return Y
    x = rng.integers(-5, 5, 64).astype(np.int32)
    want = x.astype(np.int64).reshape(-1, 16).copy()
    for g in range(want.shape[0]):
        if g % 2 == 0:
            for a in range(2):
                for b in range(3):
                    want[g] = want[g] + np.roll(want[g], -1) * (a + b)
        else:
            want[g] = (want[g] * 3)[::-1]
    np.testing.assert_array_equal(f(x).numpy(), want.reshape(-1).astype(np.int32))


# ---- native workgroups on the GPU backends ---------------------------------------------------
# vulkan, vulkan-hlsl and opengl run a group as one workgroup: group buffers are shared memory,
# em.barrier() is the language's barrier, the local size is the group's size. The programs
# below run on every backend and are checked against NumPy; their shaders go through
# glslangValidator (test_every_group_shader_passes_glslang_validator).

SCAN = 64


@em.compile
def group_scan(X: em.i32["N"]):
    """Inclusive scan of each group of 64 (Hillis-Steele); a var lives across the barriers."""
    n = X.shape[0]
    Y = em.zeros((n,), em.i32)
    with em.kernel(n, group=SCAN) as i:
        buf = em.group_buffer(SCAN, em.i32)
        l = em.local_index()
        buf[l] = X[i]
        em.barrier()
        with em.loop(6) as k:
            d = 1 << k
            t = em.var(buf[l])
            with em.if_(l >= d):
                t.val = t + buf[l - d]
            em.barrier()
            buf[l] = t
            em.barrier()
        Y[i] = buf[l]
    return Y


@em.compile
def tile_transpose(X: em.f32["H", "W"]):
    """Each 8x8 tile transposed through a group buffer; slots of threads outside the shape stay 0."""
    h, w = X.shape
    Y = em.zeros((h, w), em.f32)
    with em.kernel((h, w), group=(8, 8)) as (i, j):
        tile = em.group_buffer((8, 8), em.f32)
        li, lj = em.local_index()
        tile[li, lj] = X[i, j]
        em.barrier()
        Y[i, j] = tile[lj, li]
    return Y


@em.compile
def group_dtypes(X: em.f32["N"], K: em.i32["N"]):
    """Group buffers of each dtype, with atomics on them: f32 add, i32 max, u32 or, bool words."""
    n = X.shape[0]
    g = (n + 31) // 32
    F = em.zeros((g,), em.f32)
    I = em.zeros((g,), em.i32)
    U = em.zeros((g,), em.u32)
    B = em.zeros((n,), em.bool)
    with em.kernel(n, group=32) as i:
        fb = em.group_buffer(1, em.f32)
        ib = em.group_buffer(2, em.i32)
        ub = em.group_buffer(1, em.u32)
        bb = em.group_buffer(32, em.bool)
        l = em.local_index()
        em.atomic_add(fb[0], X[i])
        em.atomic_max(ib[1], K[i])
        em.atomic_or(ub[0], em.cast(1 << (K[i] & 31), em.u32))
        bb[l] = X[i] > 0
        em.barrier()
        with em.if_(l == 0):
            F[em.group_index()] = fb[0]
            I[em.group_index()] = ib[1]
            U[em.group_index()] = ub[0]
        B[i] = bb[31 - l]
    return F, I, U, B


@em.compile
def buffer_neighbours(X: em.f32["N"]):
    """A storage buffer written before a barrier and read after it by another thread of the group."""
    n = X.shape[0]
    T = em.zeros((n,), em.f32)
    Y = em.zeros((n,), em.f32)
    with em.kernel(n, group=64) as i:
        l = em.local_index()
        T[i] = X[i] * 2.0
        em.barrier()
        j = em.group_index() * 64 + (63 - l)
        with em.if_(j < n):
            Y[i] = T[j]
    return Y


@pytest.fixture(params=[b for b in ("vulkan", "vulkan-hlsl", "opengl") if b in _SELECTED])
def gpu_backend(request):
    """Runs the test once per GPU backend (skipped where this machine lacks its device)."""
    reason = _unavailable(request.param)
    if reason:
        pytest.skip(f"backend {request.param} unavailable: {reason}")
    em.init(backend=request.param)
    yield request.param


GROUP_PROGRAMS = [block_sum, tiled_matmul, stencil, group_scan, tile_transpose, group_dtypes, buffer_neighbours]


@pytest.mark.parametrize("n", [1000, 64, 5])
def test_partial_last_group_with_barriers(backend, rng, n):
    x = rng.integers(-100, 100, n).astype(np.int32)
    padded = np.zeros(-(-n // SCAN) * SCAN, np.int64)
    padded[:n] = x
    want = np.cumsum(padded.reshape(-1, SCAN), axis=1).reshape(-1)[:n]
    np.testing.assert_array_equal(group_scan(x).numpy(), want.astype(np.int32))


def test_partial_2d_groups_with_a_barrier(backend, rng):
    h, w = 13, 21
    x = rng.uniform(-1, 1, (h, w)).astype(np.float32)
    p = np.zeros((16, 24), np.float32)
    p[:h, :w] = x
    want = p.reshape(2, 8, 3, 8).transpose(0, 3, 2, 1).reshape(16, 24)[:h, :w]
    np.testing.assert_array_equal(tile_transpose(x).numpy(), want)


@pytest.mark.parametrize("n", [96, 70])
def test_group_buffers_of_every_dtype(backend, rng, n):
    x = rng.integers(-8, 8, n).astype(np.float32)  # small integers: float sums are exact in any order
    k = rng.integers(-1000, 1000, n).astype(np.int32)
    F, I, U, B = (t.numpy() for t in group_dtypes(x, k))
    g = -(-n // 32)
    xp = np.zeros(g * 32, np.float32)
    xp[:n] = x
    kp = np.full(g * 32, np.iinfo(np.int32).min, np.int64)
    kp[:n] = k
    np.testing.assert_array_equal(F, xp.reshape(g, 32).sum(axis=1))
    np.testing.assert_array_equal(I, np.maximum(kp.reshape(g, 32).max(axis=1), 0))  # ib starts at 0
    bits = np.zeros(g, np.uint32)
    for t in range(n):
        bits[t // 32] |= np.uint32(1) << np.uint32(k[t] & 31)
    np.testing.assert_array_equal(U, bits)
    pos = np.zeros(g * 32, bool)
    pos[:n] = x > 0
    np.testing.assert_array_equal(B, pos.reshape(g, 32)[:, ::-1].reshape(-1)[:n])


def test_storage_buffer_writes_before_a_barrier_are_visible_to_the_group(backend, rng, monkeypatch):
    n = 200
    x = rng.uniform(-1, 1, n).astype(np.float32)
    i = np.arange(n)
    j = i // 64 * 64 + 63 - i % 64
    want = np.where(j < n, 2 * x[np.minimum(j, n - 1)], 0).astype(np.float32)
    np.testing.assert_array_equal(buffer_neighbours(x).numpy(), want)
    if backend == "cpu":
        return
    src = buffer_neighbours.source()
    if backend == "vulkan-hlsl":
        assert "AllMemoryBarrierWithGroupSync();" in src and "globallycoherent RWStructuredBuffer" in src
    elif backend == "cuda":  # __syncthreads() also orders the block's global-memory accesses
        assert "__syncthreads();" in src
    else:
        assert "memoryBarrierBuffer();" in src and "coherent buffer" in src
    # A barrier that no storage-buffer write precedes orders the group's shared memory only.
    sum_src = block_sum.source()
    assert "memoryBarrierBuffer" not in sum_src and "AllMemoryBarrier" not in sum_src and "coherent" not in sum_src
    if backend == "opengl":  # the memories in the spill arena (a driver binding few buffers): coherent too
        monkeypatch.setenv("EMBER_OPENGL_MAX_STORAGE_BUFFERS", "2")
        spilled = em.compile(buffer_neighbours.fn)
        np.testing.assert_array_equal(spilled(x).numpy(), want)
        assert "coherent buffer EmberArenaU" in spilled.source()


def test_gpu_backends_run_groups_natively(gpu_backend, rng):
    backend = gpu_backend
    x = rng.uniform(-1, 1, 1000).astype(np.float32)
    block_sum(x)
    assert "barrier" in block_sum.ir("final")  # not lowered
    assert "lower_group_barriers" not in [p["name"] for p in block_sum.stats["passes"]]
    src = block_sum.source()
    tiled_matmul(np.ones((4, 4), np.float32), np.ones((4, 4), np.float32))
    mm = tiled_matmul.source()
    if backend == "vulkan-hlsl":
        assert "groupshared uint g0[256];" in src and "[numthreads(256, 1, 1)]" in src
        assert "GroupMemoryBarrierWithGroupSync();" in src
        assert "SV_GroupID" in src and "SV_GroupThreadID" in src
        assert "[numthreads(256, 1, 1)]" in mm and mm.count("groupshared uint") == 2  # 16 x 16
    else:
        assert "shared uint g0[256];" in src and "layout(local_size_x = 256) in;" in src
        assert "memoryBarrierShared();\n  barrier();" in src
        assert "gl_WorkGroupID" in src and "gl_LocalInvocationID" in src
        assert "layout(local_size_x = 256) in;" in mm and mm.count("shared uint") == 2
    assert "return;" not in src  # no thread leaves before a barrier


def test_group_larger_than_the_device_allows(gpu_backend, rng, monkeypatch):

    @em.compile
    def wide(X: em.f32["N"]):
        Y = em.zeros((X.shape[0],), em.f32)
        with em.kernel(X.shape[0], group=1024) as i:
            buf = em.group_buffer(1024, em.f32)
            buf[em.local_index()] = X[i]
            em.barrier()
            Y[i] = buf[1023 - em.local_index()]
        return Y
    x = rng.uniform(-1, 1, 3000).astype(np.float32)
    want = np.zeros(3072, np.float32)
    want[:3000] = x
    want = want.reshape(3, 1024)[:, ::-1].reshape(-1)[:3000]
    np.testing.assert_array_equal(wide(x).numpy(), want)  # 1024: the most the tracer and most devices allow
    # A device allowing fewer threads per workgroup (the limit lowered as a test hook).
    monkeypatch.setenv("EMBER_GPU_MAX_GROUP_THREADS", "512")
    with pytest.raises(em.BackendError, match=r"kernel #\d+.* workgroups of 1024 threads \(group=\(1024\)\); .* "
                                              r"runs at most 512 threads per workgroup"):
        em.compile(wide.fn)(x)
    monkeypatch.delenv("EMBER_GPU_MAX_GROUP_THREADS")

    @em.compile
    def big_buffer(X: em.f32["N"]):
        Y = em.zeros((X.shape[0],), em.f32)
        with em.kernel(X.shape[0], group=64) as i:
            buf = em.group_buffer(16384, em.f32)  # 64 KiB
            buf[em.local_index() * 256] = X[i]
            em.barrier()
            Y[i] = buf[(63 - em.local_index()) * 256]
        return Y
    with pytest.raises(em.BackendError, match=r"kernel #\d+.* group buffers of 65536 bytes per workgroup; .* at most "
                                              r"\d+ bytes of shared memory"):
        big_buffer(np.zeros(64, np.float32))


def test_every_group_shader_passes_glslang_validator(gpu_backend, tmp_path):
    """Every kernel of this file's programs exactly as the backend compiles it."""
    import shutil
    import subprocess
    from gpu_test_helpers import shaders
    backend = gpu_backend
    if not shutil.which("glslangValidator"):
        pytest.skip("glslangValidator is not installed (Debian: glslang-tools)")
    checked = 0
    for prog in GROUP_PROGRAMS:
        for symbol, shader in shaders(prog.source()):
            if backend == "vulkan-hlsl":
                path = tmp_path / f"{symbol}.hlsl"
                cmd = ["glslangValidator", "-D", "-S", "comp", "-e", symbol, "-V", str(path), "-o", f"{path}.spv"]
            elif backend == "vulkan":
                path = tmp_path / f"{symbol}.comp"
                cmd = ["glslangValidator", "-V", str(path), "-o", f"{path}.spv"]
            else:
                path = tmp_path / f"{symbol}.comp"
                cmd = ["glslangValidator", str(path)]
            path.write_text(shader)
            proc = subprocess.run(cmd, capture_output=True, text=True)
            assert proc.returncode == 0, f"{symbol}:\n{proc.stdout}{proc.stderr}\n{shader}"
            checked += 1
    assert checked >= len(GROUP_PROGRAMS)


# ---- errors --------------------------------------------------------------------------------


def test_barrier_outside_a_kernel():
    where = []

    @em.compile
    def f(X: em.f32["N"]):
        where.append(line_of_next_statement())
        em.barrier()
        return X
    with pytest.raises(em.CompileError) as e:
        f(np.zeros(4, np.float32))
    assert "em.barrier() outside an em.kernel" in str(e.value)
    assert f"test_group.py:{where[0]}" in str(e.value)


def test_group_buffer_outside_a_kernel():
    where = []

    @em.compile
    def f(X: em.f32["N"]):
        where.append(line_of_next_statement())
        em.group_buffer(64, em.f32)
        return X
    with pytest.raises(em.CompileError) as e:
        f(np.zeros(4, np.float32))
    assert "em.group_buffer() outside an em.kernel" in str(e.value)
    assert f"test_group.py:{where[0]}" in str(e.value)


def test_workgroup_calls_outside_a_traced_function():
    with pytest.raises(em.CompileError, match="em.barrier"):
        em.barrier()
    with pytest.raises(em.CompileError, match="em.group_buffer"):
        em.group_buffer(4)


def test_barrier_inside_a_divergent_if():
    where = []

    @em.compile
    def f(X: em.f32["N"]):
        with em.kernel(X.shape[0], group=64) as i:
            where.append(line_of_next_statement())
            with em.if_(X[i] > 0):
                where.append(line_of_next_statement())
                em.barrier()
        return X
    with pytest.raises(em.CompileError) as e:
        f(np.zeros(4, np.float32))
    msg = str(e.value)
    assert "em.barrier() inside an em.if_ whose condition may differ between the threads" in msg
    assert f"test_group.py:{where[1]}" in msg  # the barrier
    assert f"test_group.py:{where[0]}" in msg  # the if


def test_barrier_inside_a_per_thread_loop_and_early_exit():
    @em.compile
    def f(X: em.f32["N"]):
        with em.kernel(X.shape[0], group=64):
            with em.loop(em.local_index()):
                em.barrier()
        return X
    with pytest.raises(em.CompileError, match="whose bounds may differ"):
        f(np.zeros(4, np.float32))

    @em.compile
    def g(X: em.f32["N"]):
        with em.kernel(X.shape[0], group=64) as i:
            with em.loop(4):
                em.barrier()
                with em.if_(X[i] > 0):
                    em.break_()
        return X
    with pytest.raises(em.CompileError, match="cannot be left early"):
        g(np.zeros(4, np.float32))


def test_barrier_in_a_kernel_without_a_group():
    @em.compile
    def f(X: em.f32["N"]):
        with em.kernel(X.shape[0]):
            em.barrier()
        return X
    with pytest.raises(em.CompileError, match="without a group"):
        f(np.zeros(4, np.float32))


def test_bad_group_shapes_and_accesses():
    @em.compile
    def rank(X: em.f32["H", "W"]):
        with em.kernel(X.shape, group=8):
            pass
        return X
    with pytest.raises(em.ShapeError, match="the group has 1 dims"):
        rank(np.zeros((4, 4), np.float32))

    @em.compile
    def whole(X: em.f32["N"]):
        with em.kernel(X.shape[0], group=8):
            buf = em.group_buffer(8)
            y = buf + 1.0  # noqa: F841
        return X
    with pytest.raises(em.TypeError, match="cannot be used as a whole value"):
        whole(np.zeros(4, np.float32))

    with pytest.raises(em.TypeError, match="must be a Python int"):
        @em.compile
        def bad(X: em.f32["N"]):
            with em.kernel(X.shape[0], group=8.0):
                pass
            return X
        bad(np.zeros(4, np.float32))
