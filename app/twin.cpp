#include "twin.hpp"

#include <filesystem>
#include <fstream>

#include "sim/error.hpp"
#include "sim/json_reader.hpp"

namespace ctwin {

Scenario measured_scenario(const calibrate::Measurements& m, const std::string& file, const std::string& profile_path) {
  if (!m.scenario.is_object() || m.scenario.empty()) {
    throw InputError(file, "/scenario", "no scenario recorded", "the scenario realrun ran, as an object");
  }
  Json s = m.scenario;
  if (!profile_path.empty()) {
    if (!std::filesystem::is_regular_file(profile_path)) {
      throw InputError(profile_path, "", "no such file", "a profile JSON file (ctwin calibrate -o, docs/profiles.md)");
    }
    s["profile"] = {{"file", std::filesystem::absolute(profile_path).string()}};
  }
  return parse_scenario(s.dump(), file);
}

Dtype compute_dtype(const Scenario& sc) {
  if (const auto* t = std::get_if<TrainingJob>(&sc.job)) return t->training.precision.compute;
  return Dtype::bf16;
}

bool is_measurements_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path);
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  if (head.find(calibrate::kMeasurementsSchema) != std::string::npos) return true;  // as realrun writes it
  // Rewritten with its keys in another order (jq -S, a script's dump): "schema" may come after
  // the recorded scenario, so read the whole object.
  std::ifstream whole(path);
  const Json j = Json::parse(whole, nullptr, false);
  return j.is_object() && j.contains("schema") && j["schema"] == calibrate::kMeasurementsSchema;
}

}  // namespace ctwin
