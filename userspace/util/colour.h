// Colour for the human outputs (status, ls, tail -o compact, the run
// summary). Machine outputs (--json, -o json, audit files) never carry it.
#pragma once

#include <cstdio>
#include <string>

namespace cordon {

// Colour on a terminal only: `stream` is a tty, NO_COLOR is unset or empty
// (https://no-color.org), and TERM is not "dumb".
bool ColourWanted(std::FILE* stream);

enum class Colour { kNone, kRed, kYellow, kGreen, kDim, kBold };

// `text` wrapped in the colour's SGR sequence when `on`, else `text`.
std::string Paint(const std::string& text, Colour colour, bool on);

// The colour a verdict is shown in: denied and killed red, audited and
// detected yellow, the rest none.
Colour VerdictColour(const std::string& verdict);

}  // namespace cordon
