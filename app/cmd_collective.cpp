#include <cstdio>

#include "commands.hpp"
#include "sim/error.hpp"

namespace ctwin {

// Placeholder until 'ctwin collective' lands.
int cmd_collective(const Args&) {
  std::fputs("ctwin collective: not built yet\n", stderr);
  return kExitInternal;
}

}  // namespace ctwin
