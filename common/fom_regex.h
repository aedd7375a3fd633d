#pragma once
// The default figure-of-merit pattern: what `hpo exec` looks for in a trial's output unless the
// sweep's `fom_regex` says otherwise ("FoM: 0.91"). Group 1 is the value.

namespace hpo {

inline constexpr char kDefaultFomRegex[] =
    R"(FoM:\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)))";

}  // namespace hpo
