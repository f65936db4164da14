#include "workloads/training.hpp"

namespace ctwin {

const char* to_string(Recompute r) { return recompute_names.name(r); }

const char* to_string(PipelineSchedule s) { return schedule_names.name(s); }

const char* to_string(AttentionKernel a) { return attention_names.name(a); }
const char* to_string(MoeDispatcher d) { return moe_dispatcher_names.name(d); }
const char* to_string(CrossEntropyKernel k) { return cross_entropy_names.name(k); }

}  // namespace ctwin
