// Where the tests find the source tree, the build tree and the ctwin executable. Defined in one
// file (test_paths.cpp, compiled with the paths by tests/CMakeLists.txt), so no other test
// object holds an absolute path: a copy of the tree elsewhere, such as scripts/mutate.sh's
// scratch tree, compiles every test file as a ccache hit of the main build.
#pragma once

#include <string>

namespace ctwin::test {

// The repository root the tests read scenarios, data and docs from.
const std::string& source_dir();
// The build directory (ctwin, tests/ and the files tests write there).
const std::string& binary_dir();
// The ctwin executable of this build.
const std::string& ctwin_exe();

}  // namespace ctwin::test
