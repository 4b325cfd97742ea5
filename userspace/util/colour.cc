#include "util/colour.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace cordon {

bool ColourWanted(std::FILE* stream) {
  const char* no_colour = std::getenv("NO_COLOR");
  if (no_colour && *no_colour) return false;
  const char* term = std::getenv("TERM");
  if (term && std::strcmp(term, "dumb") == 0) return false;
  return ::isatty(::fileno(stream)) == 1;
}

std::string Paint(const std::string& text, Colour colour, bool on) {
  if (!on || colour == Colour::kNone || text.empty()) return text;
  const char* sgr = colour == Colour::kRed      ? "31"
                    : colour == Colour::kYellow ? "33"
                    : colour == Colour::kGreen  ? "32"
                    : colour == Colour::kDim    ? "2"
                                                : "1";
  return std::string("\033[") + sgr + "m" + text + "\033[0m";
}

Colour VerdictColour(const std::string& verdict) {
  if (verdict == "denied" || verdict == "killed") return Colour::kRed;
  if (verdict == "audited" || verdict == "detected") return Colour::kYellow;
  return Colour::kNone;
}

}  // namespace cordon
