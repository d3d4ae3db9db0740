// The capability matrix of the client's backends (include/tumbler/backends.h)
// as Markdown: `tumbler backends --markdown` prints it and docs/backends.md
// holds it between markers; a test keeps the two equal.
#pragma once

#include <string>

namespace tumbler::cli {

// The matrix: one row per property, one column per backend, a cell is
// "yes", "partial" or "no". Then, per backend, its URL form and each
// property's note.
std::string BackendsMarkdown();

}  // namespace tumbler::cli
