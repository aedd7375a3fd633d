#pragma once
// Quoting for /bin/sh: the result reads back as exactly `s` as one word.

#include <string>

namespace hpo {

// `s` itself when it has only safe characters (letters, digits, _-.,/:=+@%), else single-quoted.
std::string ShellQuote(const std::string& s);

}  // namespace hpo
