"""Run by test_mpi.py under `mpirun -n 2`: em.Tensors given to mpi4py as they are (DLPack, no
copies) for Send/Recv, Sendrecv, Allreduce and Bcast; each receive must land in the tensor's
own memory (its data pointer is unchanged and its values are the sent ones). Exits non-zero
(an AssertionError) on any mismatch; prints "ok <rank>" otherwise."""
import sys

import numpy as np
from mpi4py import MPI

import ember as em

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
assert size == 2, f"run with mpirun -n 2, got {size} ranks"
em.init(backend="cpu")
rng = np.random.default_rng(7)  # the same draws on both ranks
a = rng.standard_normal((33, 7)).astype(np.float32)
b = rng.integers(-1000, 1000, 50).astype(np.int32)


@em.compile
def twice(x: em.f32["N", 7]):  # noqa: F821
    return x * 2.0


# Send / Recv of a program's output into a zero tensor.
if rank == 0:
    comm.Send(twice(a), dest=1, tag=5)
else:
    r = em.zeros((33, 7), em.f32)
    ptr = r._data_ptr
    comm.Recv(r, source=0, tag=5)
    assert r._data_ptr == ptr
    np.testing.assert_array_equal(r.numpy(), a * 2)

# Sendrecv between the ranks, i32.
mine = em.tensor(b + rank)
got = em.zeros(50, em.i32)
ptr = got._data_ptr
comm.Sendrecv(mine, dest=1 - rank, recvbuf=got, source=1 - rank)
assert got._data_ptr == ptr
np.testing.assert_array_equal(got.numpy(), b + (1 - rank))

# Allreduce in place and into another tensor.
t = em.tensor(a * (rank + 1))
ptr = t._data_ptr
comm.Allreduce(MPI.IN_PLACE, t, op=MPI.SUM)
assert t._data_ptr == ptr
np.testing.assert_allclose(t.numpy(), a * 3, rtol=1e-6)
out = em.zeros((33, 7), em.f32)
comm.Allreduce(em.tensor(a + rank), out, op=MPI.MAX)
np.testing.assert_array_equal(out.numpy(), a + 1)

# A row range of a tensor through its writable view (what distributed_fluid.py does with halos).
v = em.zeros((6, 7), em.f32)
comm.Sendrecv(np.ascontiguousarray(a[:2]) + rank, dest=1 - rank, recvbuf=v.view_numpy()[2:4], source=1 - rank)
np.testing.assert_array_equal(v.numpy()[2:4], a[:2] + (1 - rank))
assert not v.numpy()[:2].any() and not v.numpy()[4:].any()

# Bcast into a tensor.
c = em.tensor(a) if rank == 0 else em.zeros((33, 7), em.f32)
comm.Bcast(c, root=0)
np.testing.assert_array_equal(c.numpy(), a)
print(f"ok {rank}")
sys.stdout.flush()
