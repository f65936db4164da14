// ctwin calibrate: fits a profile (docs/profiles.md) to measurements (realrun's files, nccl-tests
// output, Kineto traces), prints each fit's residuals and flags what the model cannot explain
// (docs/calibration.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include <nlohmann/json.hpp>

#include "calibrate/fit.hpp"
#include "calibrate/readers.hpp"
#include "cli.hpp"
#include "commands.hpp"
#include "sim/error.hpp"
#include "sim/output_file.hpp"
#include "twin.hpp"

namespace ctwin {

namespace {

using calibrate::FitResult;

void print_fits(const std::vector<FitResult>& fits) {
  std::printf("%-34s %5s %9s %9s %7s  %s\n", "fit", "n", "rms err", "max err", "flagged", "fitted values");
  for (const FitResult& f : fits) {
    std::string values;
    for (const auto& [k, v] : f.values) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "%s%s=%.4g", values.empty() ? "" : " ", k.c_str(), v);
      values += buf;
    }
    if (!f.fitted()) values = "(" + f.note + ")";
    std::printf("%-34s %5zu %8.1f%% %8.1f%% %7d  %s\n", f.name.c_str(), f.points.size(), 100 * f.rms_rel_error(),
                100 * f.max_abs_rel_error(), f.flagged(), values.c_str());
    if (f.fitted() && !f.note.empty()) std::printf("%-34s note: %s\n", "", f.note.c_str());
  }
  bool any = false;
  for (const FitResult& f : fits) {
    for (const auto& pt : f.points) {
      if (!pt.flagged) continue;
      if (!any) std::printf("\nflagged (the model cannot explain them: |error| > 25%%, or > 3x the fit's median):\n");
      any = true;
      std::printf("  %-28s %-40s measured %10.4g s  predicted %10.4g s  %+7.1f%%\n", f.name.c_str(), pt.label.c_str(),
                  pt.measured_s, pt.predicted_s, 100 * pt.rel_error());
    }
  }
  if (!any) std::printf("\nno measurement flagged\n");
}

nlohmann::ordered_json fits_json(const std::vector<FitResult>& fits) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const FitResult& f : fits) {
    nlohmann::ordered_json j;
    j["name"] = f.name;
    j["formula"] = f.formula;
    j["values"] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : f.values) j["values"][k] = v;
    j["points"] = f.points.size();
    j["rms_rel_error"] = f.rms_rel_error();
    j["max_abs_rel_error"] = f.max_abs_rel_error();
    j["flagged"] = nlohmann::ordered_json::array();
    for (const auto& pt : f.points) {
      if (pt.flagged)
        j["flagged"].push_back({{"label", pt.label},
                                {"measured_s", pt.measured_s},
                                {"predicted_s", pt.predicted_s},
                                {"error", pt.rel_error()}});
    }
    j["note"] = f.note;
    a.push_back(j);
  }
  return a;
}

}  // namespace

int cmd_calibrate(const Args& args) {
  const std::string usage =
      "usage: ctwin calibrate MEASUREMENTS... [-o PROFILE.json] [--force] [--no-tables] [--json]\n\n"
      "Fits a calibration profile to measurements: ctwin realrun's files, nccl-tests text output or\n"
      "PyTorch profiler (Kineto) traces, told apart by content. Prints every fit with its residuals and\n"
      "flags the measurements the model cannot explain; -o writes the profile (atomically; an existing\n"
      "file only with --force), with the measured tables unless --no-tables. docs/calibration.md.";
  auto p = parse_args(args, usage,
                      {{"-o", "PROFILE", "write the fitted profile to PROFILE"},
                       {"--force", "", "overwrite PROFILE if it exists"},
                       {"--no-tables", "", "fitted coefficients only, no measured tables"},
                       {"--json", "", "print the fits as JSON"}});
  if (!p) return kExitOk;
  if (p->positional.empty())
    throw InputError("", "MEASUREMENTS", "no measurements given", "measurements files, nccl-tests output or traces");
  // Refuse an existing output before the work, not after it.
  if (const auto out = p->get("-o")) check_output_path(*out, p->has("--force"), "-o");
  std::vector<calibrate::Measurements> ms;
  std::vector<std::string> files = p->positional;
  for (const std::string& f : files) ms.push_back(calibrate::load_any_measurements(f));

  // The measured cluster: the first file that recorded its scenario.
  std::optional<Scenario> sc;
  std::string sc_file;
  for (std::size_t i = 0; i < ms.size() && !sc; ++i) {
    if (ms[i].scenario.is_object() && !ms[i].scenario.empty()) {
      sc = measured_scenario(ms[i], files[i]);
      sc_file = files[i];
    }
  }
  calibrate::Measurements all;
  for (const auto& m : ms) {
    all.ops.insert(all.ops.end(), m.ops.begin(), m.ops.end());
    all.collectives.insert(all.collectives.end(), m.collectives.begin(), m.collectives.end());
    all.overlaps.insert(all.overlaps.end(), m.overlaps.begin(), m.overlaps.end());
  }
  int gpus_per_node = sc ? sc->cluster.gpus_per_node : 0;
  if (gpus_per_node == 0) {
    for (const auto& m : ms) {
      if (m.host.ranks > 0 && gpus_per_node == 0) gpus_per_node = std::max(1, m.host.ranks / std::max(1, m.host.nodes));
    }
  }
  gpus_per_node = std::max(gpus_per_node, 1);

  std::string source = "ctwin calibrate on";
  for (const auto& f : files) source += " " + f;
  Profile prof = sc ? (sc->profile ? *sc->profile : builtin_profile(sc->cluster.gpu.name)) : Profile{};
  prof.name = "calibrated";
  prof.source = source;
  prof.gpus.clear();
  std::vector<FitResult> fits;
  if (sc) {
    prof.gpus.push_back(sc->cluster.gpu.name);
    // The GPU catalog's own coefficients are where the roofline starts (default_compute_model).
    prof.compute.gemm_efficiency = sc->cluster.gpu.gemm_efficiency;
    prof.compute.fp8_gemm_efficiency = sc->cluster.gpu.fp8_gemm_efficiency;
    prof.compute.hbm_efficiency = sc->cluster.gpu.hbm_efficiency;
    prof.compute.kernel_launch_us = sc->cluster.gpu.kernel_launch_us;
    for (auto& f : calibrate::fit_compute(all.ops, sc->cluster.gpu, compute_dtype(*sc), prof, source))
      fits.push_back(std::move(f));
    for (auto& f : calibrate::fit_links(all.collectives, sc->cluster, prof, source)) fits.push_back(std::move(f));
    if (!all.overlaps.empty()) fits.push_back(calibrate::fit_overlap(all.overlaps, prof, source));
  } else if (!all.ops.empty()) {
    FitResult f;
    f.name = "compute";
    f.note = "no scenario recorded (nccl-tests or Kineto input): no GPU peaks to fit against";
    fits.push_back(f);
  }
  for (auto& f : calibrate::fit_alpha_beta_groups(all.collectives, gpus_per_node)) fits.push_back(std::move(f));
  if (!p->has("--no-tables")) prof.tables = calibrate::measured_tables(all, gpus_per_node);

  if (p->has("--json")) {
    nlohmann::ordered_json j;
    j["fits"] = fits_json(fits);
    j["profile"] = p->get("-o") ? nlohmann::ordered_json(*p->get("-o")) : nlohmann::ordered_json(nullptr);
    j["tables"] = {{"collectives", prof.tables.collectives.size()}, {"kernels", prof.tables.kernels.size()}};
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    print_fits(fits);
    std::printf("tables: %zu collective curves, %zu kernel shapes\n", prof.tables.collectives.size(),
                prof.tables.kernels.size());
  }
  if (const auto out = p->get("-o")) {
    const std::string text = profile_to_json(prof);
    write_file_atomically(*out, p->has("--force"), "-o", [&](std::ostream& o) { o << text; });
    if (!p->has("--json")) std::printf("wrote %s\n", out->c_str());
  }
  return kExitOk;
}

}  // namespace ctwin
