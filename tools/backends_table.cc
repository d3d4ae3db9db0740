#include "backends_table.h"

#include "tumbler/backends.h"

namespace tumbler::cli {
namespace {

std::string_view SupportWord(Support s) {
  switch (s) {
    case Support::kYes: return "yes";
    case Support::kPartial: return "partial";
    case Support::kNo: return "**no**";
  }
  return "?";
}

// A note inside a table cell: no line breaks, no unescaped pipes.
std::string Cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string BackendsMarkdown() {
  std::string out = "| property |";
  std::string rule = "| --- |";
  for (const BackendInfo& b : Backends()) {
    out += " `";
    out += b.scheme;
    out += "://` |";
    rule += " --- |";
  }
  out += "\n" + rule + "\n";
  for (int p = 0; p < kPropertyCount; ++p) {
    auto property = static_cast<Property>(p);
    out += "| ";
    out += PropertyName(property);
    out += " |";
    for (const BackendInfo& b : Backends()) {
      out += " ";
      out += SupportWord(b.Get(property).support);
      out += " |";
    }
    out += "\n";
  }
  for (const BackendInfo& b : Backends()) {
    out += "\n### ";
    out += b.name;
    out += " (`";
    out += b.url;
    out += "`)\n\n| property | support | how, or why not |\n| --- | --- | --- |\n";
    for (const Capability& c : b.capabilities) {
      out += "| ";
      out += PropertyName(c.property);
      out += " | ";
      out += SupportWord(c.support);
      out += " | ";
      out += Cell(c.note);
      out += " |\n";
    }
  }
  return out;
}

}  // namespace tumbler::cli
