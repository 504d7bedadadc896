// The user's source lines as comments in generated kernels (em.export's readable shaders): each
// statement whose source line differs from the previous statement's is preceded by
// `// file.py:17: <the line's text>`. Only the file's base name is printed, so the text is the
// same wherever the program lives.
#pragma once
#include <string>

#include "core/ir/error.h"

namespace ember {

// The comment line for `loc` (without the dialect's comment marker), "" when `loc` is unknown.
// The line's text is read from the file (cached per process); a file that cannot be read gives
// `file.py:17`. Non-ASCII bytes become '?' and trailing backslashes are dropped (a `\` would
// continue a C or GLSL comment onto the next line).
std::string source_comment(const SourceLoc& loc);

}  // namespace ember
