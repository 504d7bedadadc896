// prog.explain(): why adjacent kernels did not merge and why host loops stay sequential, one
// line each, in the user's terms (memory names, index expressions in the kernel's indices, source
// lines). merge_kernels, the last pass to decide whether two adjacent kernels become one, records
// each refusal here; run_pipeline asks about host loops right after it (indices are still
// multi-dimensional). Recording happens only while a log is set (CompiledProgram::explain runs
// the pipeline again on a copy of the traced program with one), so compiles pay nothing.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/analysis/dependence.h"
#include "core/ir/node.h"

namespace ember {

// Reasons by node id. A text names kernels as "{K<id>}" (kernel node ids): kernels are numbered
// only at form_kernels, so explain_text() puts in their final numbers.
struct ExplainLog {
  std::map<std::pair<int, int>, std::string> pairs;  // (earlier kernel, later kernel) -> why not merged
  std::map<int, std::string> loops;                   // host loop -> why it runs its iterations in order
  std::map<int, int> replaced;                        // kernel -> the kernel it replaced (kernel_like)
};

// The log the pipeline on this thread records into, or null (then nothing is recorded).
ExplainLog*& explain_log();

// "{K<id>}": kernel k in a log text.
std::string kernel_ref(const Node* k);
// A memory as the user named it: an argument's name, the variable a line assigned it to
// (`B = em.zeros(...)`), or where it was made.
std::string memory_name(const Node* mem);
// Registers the lines of a source that is not a readable file (a doctest, a notebook cell): the
// Python front end passes them from linecache so loops and memories keep their names.
void register_source(const std::string& file, const std::vector<std::string>& lines);
// The names a scope's source line binds after " as ": `with em.loop(n) as t:` gives {"t"},
// `with em.kernel((H, W)) as (i, j):` gives {"i", "j"}; empty when the line is unreadable.
std::vector<std::string> as_names(const Node* scope);
// An index expression in terms of its kernel's indices (i, j, k, ...), loop counters and host
// values (symbolic dims and arguments by name).
std::string index_text(const Node* x);

// The line for a dependence that within_thread (or loop_carries) reported. `first_who`/`second_who`
// name the sides ("{K<id>}" or "the host"); `where`: "at another thread" or "in an earlier
// iteration".
std::string dependence_text(const DepWhy& why, const std::string& first_who, const std::string& second_who,
                            const std::string& where);

// Records a line for the adjacent kernels a (earlier) and b; the last record for a pair counts.
void explain_pair(const Node* a, const Node* b, const std::string& text);
// Records that kernel `now` replaces (or was split from) kernel `was`.
void explain_replaced(const Node* was, const Node* now);
// Records that host node `host` keeps adjacent kernels a and b (b the next kernel after it) apart.
void explain_separated(const Node* a, const Node* host, const Node* b);
// Records, for each host loop holding kernels, the dependence between iterations that keeps it
// sequential (or that none was found).
void explain_host_loops(Program& p, ExplainLog& log);
// The explanation of a lowered program: a line per adjacent kernel pair that stayed apart and per
// host loop with kernels, in program order, or one line saying everything fused.
std::string explain_text(const Program& p, const ExplainLog& log);

}  // namespace ember
