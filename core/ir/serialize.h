// A compact binary form of a Program, for the program cache (backends/compiled_program.cpp): a
// lowered program is saved once and loaded by later processes instead of running the pipeline.
// It keeps everything the printer, the verifier, the interpreter and the backends read: every
// node (op, dtype, id, shape, operands, tree structure, kernel params and memories), every
// attribute of EMBER_NODE_ATTRS (through the list itself: an attribute added there is saved
// with no other edit, and a type the codec does not know fails to compile), and the Program's
// fields (name, args, dims, num_outputs, next_kernel_id, the next node id). Use lists and dim
// use lists are not stored: Program::create / set_shape / add_operand rebuild them.
//
// Layout: magic "EMBERIR\0", format version, a hash of the IR schema (op table and attribute
// list, so a blob from an Ember with other ops is refused), the payload, and a 64-bit checksum
// of everything before it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/ir/node.h"
#include "core/ir/verifier.h"

namespace ember {

// Bump when the layout below changes (the schema hash covers the op table and attributes).
constexpr uint32_t kProgramFormatVersion = 1;

// The schema hash written into every blob, as 16 hex digits (part of the program cache's key).
std::string program_schema_id();

// Throws ember::Error when the program cannot be saved: it refers to an erased node, an unlinked
// node has children, or it nests deeper than loading allows.
std::string serialize_program(const Program& p);

// Rebuilds a program from serialize_program's bytes. Malformed input (truncated, corrupt, another
// format or schema) throws ember::Error and never crashes: every read is bounds-checked, ops,
// dtypes and enum attributes are range-checked, references are checked, and the verifier runs
// on the result (with `verify_options`: kernels_formed for a program after fuse_kernels; use
// lists, built here from the operands and shapes, are not checked again).
// `check_checksum` false skips the checksum only (tests use it to reach the structural checks
// with corrupted input); `run_verifier` false skips the verifier only (the program cache, whose
// checksummed entries were verified-clean programs when saved; every other check still runs).
std::unique_ptr<Program> deserialize_program(std::string_view bytes, const VerifyOptions& verify_options = {},
                                             bool check_checksum = true, bool run_verifier = true);

// The attributes print_program does not show (metadata such as source locations, and the ones
// printer_omits lists), of every node in program order, in the serialized attribute encoding.
// With the printed text it identifies a traced program completely: the program cache keys on both,
// so a cached program never carries another program's source lines into its error messages.
std::string unprinted_attributes(const Program& p);

}  // namespace ember
