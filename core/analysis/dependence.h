// Dependence analysis: the one place passes ask whether reordering or fusing statements keeps
// their memory dependences. Statements are grouped by the thread space they run in (a kernel, a
// device scope before fusion, a loop in a kernel); each access's index is extracted as an affine
// (quasi-affine, piecewise) function of the thread's coordinates, the counters of the loops around
// it and host scalars, and isl decides whether two groups' accesses can meet across threads.
// Indices that are not affine are over-approximated (any element), never under. The model is
// explained in core/analysis/README.md. Runs on multi-dimensional indices (before lower_indexing).
#pragma once
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/ir/node.h"

struct isl_map;

namespace ember {

// Whether memory access n (load/store/atomic, not flat) touches exactly the element of its own
// thread in kernel k, by syntax alone: the memory is shaped like k and each index is k's
// coordinate on that axis (or 0 on an axis of size 1). The fast path of the analysis.
bool at_own_element(const Node* n, const Node* k);

enum class AccessKind : uint8_t {
  read,    // load; a var or value read at the thread's element
  write,   // store, set, a var's initialization; an atomic whose old value is used
  update,  // an atomic whose old value is unused: commutes with updates of the same kind
};

// One memory access of a statement group. `memory` is a memory node, or a var or value node that
// fusion would turn into one; `own` marks an implicit access of the thread's element (a var set or
// read elementwise), whose node is not a load/store/atomic.
struct MemAccess {
  const Node* node;
  const Node* memory;
  AccessKind kind;
  bool own = false;
};

// The accesses of some statements that run per thread of `shape`: `index` nodes of that shape
// are the thread's coordinates, and loops under the statements (or around them, up to the thread
// scope) give loop dimensions. `lead` leading coordinates name the thread that the fused code
// would run an access in (all of them, or |P| for a row kernel of P merged with one over P + [T]).
// The accesses of one memory in a group, and how many of them write.
struct MemoryAccesses {
  std::vector<MemAccess> all;
  int writes = 0;
};

class AccessGroup {
 public:
  AccessGroup(const std::vector<Node*>& shape, int lead);
  // Adds the accesses of `root` and everything inside it.
  void add(Node* root);
  // Adds one access (callers that model a value as memory).
  void add_access(const MemAccess& a);
  void clear() { by_memory_.clear(); }

  const std::vector<Node*>& shape() const { return shape_; }
  int lead() const { return lead_; }
  const std::unordered_map<const Node*, MemoryAccesses>& by_memory() const { return by_memory_; }

 private:
  std::vector<Node*> shape_;
  int lead_;
  std::unordered_map<const Node*, MemoryAccesses> by_memory_;
};

enum class DepPairs : uint8_t {
  all,        // flow, anti and output dependences
  flow_anti,  // only write/read pairs (a grid-synchronous loop's test)
};

// Counters of how questions were answered (tests, EMBER_DEBUG=time).
struct DependenceStats {
  long pairs = 0;      // access pairs on one memory with a write
  long fast = 0;       // decided by the syntactic own-row rule
  long isl = 0;        // decided by isl
  long too_many = 0;   // given up as dependent: more isl checks than one query allows
};

// Why a query answered "dependent" (prog.explain() prints it): the access pair it stopped at,
// `first` running before `second` (the earlier group or the earlier host-loop iteration), and how.
struct DepWhy {
  enum class Cause : uint8_t {
    crosses,   // the two accesses can meet at different threads (or iterations)
    too_many,  // more pairs than one query checks: assumed dependent
    unknown,   // isl could not build the relation: assumed dependent
  };
  Cause cause = Cause::unknown;
  MemAccess first{nullptr, nullptr, AccessKind::read};
  MemAccess second{nullptr, nullptr, AccessKind::read};
};

// Totals of every query on this thread since the last reset (run_pipeline resets them per compile
// and prints them under EMBER_DEBUG=time): queries, the time spent in them, how pairs were
// answered. EMBER_DEPENDENCE=syntactic answers every pair the syntactic rule cannot decide as
// dependent, without isl (to measure what the analysis costs and gains).
struct DependenceTotals {
  long queries = 0;
  double ms = 0;
  DependenceStats pairs;
};
DependenceTotals& dependence_totals();

class DependenceAnalysis {
 public:
  DependenceAnalysis();
  ~DependenceAnalysis();
  DependenceAnalysis(const DependenceAnalysis&) = delete;
  DependenceAnalysis& operator=(const DependenceAnalysis&) = delete;

  // Whether every dependence between an access of `a` and one of `b` (same memory, at least one
  // a write; updates of one kind commute) relates instances in the same fused thread: equal
  // first `lead` coordinates (a's and b's leads must be equal). Two such groups may run in one
  // kernel, each thread running its part of a then its part of b.
  // `why`, when given, receives the pair that answered false (a's access first).
  bool within_thread(const AccessGroup& a, const AccessGroup& b, DepPairs pairs = DepPairs::all,
                     DepWhy* why = nullptr);

  // Whether access n of a kernel (or device scope) of shape `shape` touches exactly its thread's
  // element: the memory has that shape and isl proves the index map is the identity (clamp(i)
  // for i in range, i % N, ...). at_own_element is the syntactic special case.
  bool own_element(const Node* n, const std::vector<Node*>& shape);

  // Whether host loop `loop` carries a dependence among `groups` (the accesses of the kernels and
  // host statements of its body, in program order, each group with its own shape): two accesses of
  // one memory, one a write (updates of one kind commute), that may touch one element in different
  // iterations. The counter is an iteration dimension here, not a parameter; host values made
  // inside the body that are not affine in it are unknown; memories allocated inside the loop are
  // each iteration's own and never carry one. `why`, when given, gets the pair (the earlier
  // iteration's access first), a flow dependence in preference to the others
  // (parallelize_host_loops asks without it, prog.explain() with it).
  bool loop_carries(const Node* loop, const std::vector<const AccessGroup*>& groups, DepWhy* why = nullptr);

  // The thread axes (a bit each) that the element of access n (load/store/atomic, not flat, in a
  // kernel of `shape`) does not depend on, by syntax: every index is exact in the model (nothing
  // over-approximated) and names none of those coordinates. 0 where it cannot tell.
  uint64_t ignored_axes(const Node* n, const std::vector<Node*>& shape);

  // Whether any two instances of access n (kernel of `shape`, loops around it included) that touch
  // one element agree on every thread axis in `axes`: the index map is injective on them
  // (A[2 * i + 1], a transpose, a shift). Syntax first, then isl; false where neither shows it.
  bool injective_on(const Node* n, const std::vector<Node*>& shape, uint64_t axes);

  // The access relation S[thread coordinates, counters of the loops around n inside its kernel,
  // outermost first] -> M[element] of access x in a kernel of `shape`, as a new isl map the caller
  // owns (null when isl cannot build it). For queries in other files of core/analysis
  // (schedule_legality.cpp); passes never see isl.
  isl_map* access_relation(const MemAccess& x, const std::vector<Node*>& shape);

  const DependenceStats& stats() const { return stats_; }

  struct Impl;

 private:
  Impl& impl();  // made on the first question for isl
  std::unique_ptr<Impl> impl_;
  DependenceStats stats_;
};

}  // namespace ember
