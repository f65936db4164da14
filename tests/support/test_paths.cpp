// The one test object that holds the build's absolute paths (tests/CMakeLists.txt defines them
// for this file only).
#include "test_paths.hpp"

namespace ctwin::test {

const std::string& source_dir() {
  static const std::string dir = CTWIN_SOURCE_DIR;
  return dir;
}

const std::string& binary_dir() {
  static const std::string dir = CTWIN_BINARY_DIR;
  return dir;
}

const std::string& ctwin_exe() {
  static const std::string exe = CTWIN_EXE;
  return exe;
}

}  // namespace ctwin::test
