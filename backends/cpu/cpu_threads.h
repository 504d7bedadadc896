// How many threads the CPU backend's kernels may use: every processor OpenMP would use, or one
// while the CPU is contended. A parallel region waits for its slowest thread, and on a busy
// machine a worker thread waits a scheduler slice (milliseconds) before it runs, so a kernel of
// microseconds becomes one of milliseconds; on one thread it only shares its core.
#pragma once

namespace ember {

// Called by the loader with each kernel library's handle: finds the OpenMP runtime's
// omp_set_num_threads / omp_get_max_threads (once per process).
void cpu_threads_bind(void* library_handle);

// Sets the calling thread's OpenMP thread count for the next kernel: 1 while Linux's pressure
// stall information (/proc/pressure/cpu, sampled at most every 50 ms) shows tasks waiting for a
// CPU for more than a quarter of the last interval (less than a tenth to leave that state), else
// the count OpenMP started with (OMP_NUM_THREADS or every processor). EMBER_CPU_ADAPT=0 keeps
// the latter always; without /proc/pressure it is always the latter.
void cpu_threads_for_next_kernel();

}  // namespace ember
