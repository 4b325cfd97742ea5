// <ldns/ldns.h> for C++: without stdbool.h's __bool_true_false_are_defined
// first, ldns's common.h defines `bool` as a macro (`_Bool`), which breaks
// libstdc++ under clang.
#pragma once

#include <stdbool.h>  // NOLINT: see above

#include <ldns/ldns.h>
