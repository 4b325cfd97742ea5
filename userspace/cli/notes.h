// Notes said once per terminal session (issue 19 item 7): where stderr is a
// terminal, a note this terminal session was already shown (the same text, in
// a session with the same leader) is left out, unless --verbose; on a pipe or
// a file (scripts, CI logs) every note is said every time. What was shown is
// kept in /run/cordon/notes-seen/<tty>-<sid>-<leader start time>, one hash
// per note; the files of ended sessions are removed as others are written.
#pragma once

#include <string>
#include <vector>

namespace cordon::cli {

constexpr const char* kNotesSeenDir = "/run/cordon/notes-seen";

// The notes to say now, in order; those returned are recorded as shown.
std::vector<std::string> NotesToShow(const std::vector<std::string>& notes, bool verbose);

}  // namespace cordon::cli
