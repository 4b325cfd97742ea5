// Text chosen by the sandboxed workload (comm, exe, paths, unix addresses)
// on its way into events, and any text on its way to a terminal.
//
// Two forms:
//  - the data form (EscapeWorkloadBytes): what events carry in every sink and
//    on the wire. Always valid UTF-8, lossless (UnescapeWorkloadBytes gives the
//    original bytes back), and free of control characters: '\' is written
//    "\\", and every C0 control, DEL, C1 control (U+0080..U+009F) and every
//    byte that is not part of a well-formed UTF-8 sequence is written "\xNN"
//    (two lowercase hex digits, one per byte).
//  - the display form (DisplayText): for human formats (compact tail, run
//    summary, status, policy descriptions). On top of the above (without
//    doubling backslashes, so data-form text shows as it is stored), the
//    characters that reorder or hide text on a terminal (bidi controls such
//    as U+202E, zero-width and other invisible formatting characters, line and
//    paragraph separators) are written "\u{XXXX}".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cordon {

std::string EscapeWorkloadBytes(std::string_view raw);

// The original bytes of a data-form string; nullopt if `escaped` holds a
// backslash that starts neither "\\" nor "\xNN".
std::optional<std::string> UnescapeWorkloadBytes(std::string_view escaped);

std::string DisplayText(std::string_view text);

// DisplayText in single quotes, for naming a value in an error message.
std::string Quoted(std::string_view text);

// The longest prefix of a data-form string of at most `max` bytes that ends
// between two characters (never inside a UTF-8 sequence or an escape).
std::string_view TruncateEscaped(std::string_view escaped, size_t max);

// A name an operator chose (a sandbox name): printable UTF-8 that both forms
// leave as it is.
bool IsCleanName(std::string_view name);

// Bidi controls and invisible formatting characters (the display form
// escapes them).
bool IsHiddenFormatCharacter(char32_t cp);

// The parts with `separator` between them ("a, b, c").
std::string JoinStrings(const std::vector<std::string>& parts, std::string_view separator);

}  // namespace cordon
