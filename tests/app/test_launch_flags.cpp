// The best layout's launch flags (`ctwin sweep`): how the layers split over the pipeline stages
// in Megatron-LM's own terms. Each layout string is read back the way Megatron-Core parses it
// (pipeline_parallel_layer_layout.py parse_str_to_list: unroll "(X)*k", then "c*k", split on
// "|"), so the check is on what Megatron would build, not on the string's spelling alone.
#include <regex>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "sweep_report.hpp"

namespace ctwin {
namespace {

struct Stage {
  int layers = 0;
  bool embedding = false, loss = false;
};

std::vector<Stage> parse_layout(std::string s) {
  std::erase(s, ',');
  const std::regex group(R"(\(([^)]+)\)\*(\d+))"), one(R"((.)\*(\d+))");
  for (const std::regex* re : {&group, &one}) {
    std::smatch m;
    while (std::regex_search(s, m, *re)) {
      std::string unrolled;
      for (int i = 0; i < std::stoi(m[2].str()); ++i) unrolled += m[1].str();
      s = m.prefix().str() + unrolled + m.suffix().str();
    }
  }
  std::vector<Stage> out(1);
  for (char c : s) {
    if (c == '|') out.emplace_back();
    if (c == 't') ++out.back().layers;
    if (c == 'E') out.back().embedding = true;
    if (c == 'L') out.back().loss = true;
  }
  return out;
}

std::vector<int> layers_of(const std::vector<Stage>& stages) {
  std::vector<int> n;
  for (const Stage& s : stages) n.push_back(s.layers);
  return n;
}

}  // namespace

TEST_CASE("Megatron's pipeline layout string: Llama 3 405B's 128 virtual stages and an uneven 4-stage split") {
  // Llama 3 405B (docs/validation.md): PP16 x VP8 = 128 virtual stages, the first holding the
  // embedding alone, the last the loss alone, one decoder layer in each of the 126 between.
  std::vector<int> llama(128, 1);
  llama.front() = llama.back() = 0;
  const std::string s = megatron_pipeline_layout(llama);
  CHECK(s == "E|(t|)*126,L");
  const auto stages = parse_layout(s);
  REQUIRE(stages.size() == 128);
  CHECK(layers_of(stages) == llama);
  CHECK(stages.front().embedding);
  CHECK(stages.back().loss);
  CHECK_FALSE(stages[1].embedding);

  const std::vector<int> uneven = {2, 3, 3, 2};
  CHECK(megatron_pipeline_layout(uneven) == "Et*2|(t*3|)*2,t*2L");
  CHECK(layers_of(parse_layout(megatron_pipeline_layout(uneven))) == uneven);
}

TEST_CASE("the split's flags: none for an even split, layers per virtual stage when even, else the layout") {
  Parallelism p;
  p.pp = 4;
  CHECK(pipeline_split_flags(32, p).empty());  // 8 a stage, Megatron's default
  p.schedule = PipelineSchedule::interleaved;
  p.virtual_stages = 3;
  CHECK(pipeline_split_flags(96, p) == " --num-layers-per-virtual-pipeline-stage 8");  // 96 / (4 x 3)
  // Megatron's uneven first and last stages: 6 + 10 + 10 + 6 = 32 over PP4 without chunks.
  Parallelism u;
  u.pp = 4;
  u.first_stage_layers = 6;
  u.last_stage_layers = 6;
  const std::string f = pipeline_split_flags(32, u);
  const std::string key = " --pipeline-model-parallel-layout \"";
  REQUIRE(f.rfind(key, 0) == 0);
  const std::string layout = f.substr(key.size(), f.size() - key.size() - 1);
  CHECK(layers_of(parse_layout(layout)) == std::vector<int>{6, 10, 10, 6});
  // The embedding counted as a layer: 31 decoder layers + E over 4 stages of 8.
  Parallelism e;
  e.pp = 4;
  e.account_for_embedding = true;
  const std::string g = pipeline_split_flags(31, e);
  REQUIRE(g.rfind(key, 0) == 0);
  CHECK(layers_of(parse_layout(g.substr(key.size(), g.size() - key.size() - 1))) == std::vector<int>{7, 8, 8, 8});
  CHECK(pipeline_split_flags(32, Parallelism{}).empty());  // no pipeline
  // Uneven with virtual stages: Llama 3 405B's list (126 layers, PP16 x VP8) is the layout, not
  // 126 / 128 = 0 layers a virtual stage.
  Parallelism l;
  l.pp = 16;
  l.schedule = PipelineSchedule::interleaved;
  l.virtual_stages = 8;
  l.pipeline_layers.assign(128, 1);
  l.pipeline_layers.front() = l.pipeline_layers.back() = 0;
  CHECK(pipeline_split_flags(126, l) == key + "E|(t|)*126,L\"");
}

}  // namespace ctwin
