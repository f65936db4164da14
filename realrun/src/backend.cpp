#include "realrun/cuda_backend.hpp"

namespace ctwin::realrun {

bool gpu_backend_built() {
#ifdef CTWIN_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace ctwin::realrun
