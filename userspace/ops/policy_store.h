// Policy texts by digest (README "Policy texts by digest"): every attach,
// replacement and `cordon run` keeps the exact text of the policy it puts in
// force, named by its digest, so that whoever reads an event later (a
// regression case, an incident report) finds the policy the event's
// `policyDigest` names, byte for byte.
#pragma once

#include <string>

#include "util/fs.h"
#include "util/result.h"

namespace cordon::ops {

// The entry's file name for a digest: "sha256-<64 hex>.yaml"; "" when the
// digest is not "sha256:<64 lower-case hex>" (builtin:default is not kept).
std::string PolicyStoreName(const std::string& digest);

// Keeps `text`, the policy put in force with `digest`, in `dir` (created
// 0700; the entry 0600, written whole under a temporary name and renamed into
// place). An entry that already holds that text is left alone; one that does
// not (damaged, or written by someone else) is replaced. A digest that is not
// sha256:<hex> (builtin:default) keeps nothing; a text whose digest is not
// `digest` is an error.
cordon::Status KeepPolicyText(const std::string& text, const std::string& digest,
                              const std::string& dir = PolicyStoreDir());

// The text kept for `digest`, checked: its SHA-256 must be the digest (a
// changed entry is an error naming the file, never returned).
// "builtin:default" is the built-in default policy's text.
Result<std::string> KeptPolicyText(const std::string& digest, const std::string& dir = PolicyStoreDir());

}  // namespace cordon::ops
