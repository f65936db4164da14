#include <cstdio>

#include "commands.hpp"
#include "sim/error.hpp"

namespace ctwin {

int cmd_run(const Args&) {
  std::fputs("ctwin run: not built yet\n", stderr);
  return kExitInternal;
}

}  // namespace ctwin
