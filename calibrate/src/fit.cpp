#include "calibrate/fit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include <Eigen/Dense>

#include "calibrate/alpha_beta.hpp"
#include "topology/network.hpp"

namespace ctwin::calibrate {

double FitResult::rms_rel_error() const {
  if (points.empty()) return 0;
  double ss = 0;
  for (const FitPoint& p : points) ss += p.rel_error() * p.rel_error();
  return std::sqrt(ss / static_cast<double>(points.size()));
}

double FitResult::max_abs_rel_error() const {
  double m = 0;
  for (const FitPoint& p : points) m = std::max(m, std::fabs(p.rel_error()));
  return m;
}

int FitResult::flagged() const {
  return static_cast<int>(std::count_if(points.begin(), points.end(), [](const FitPoint& p) { return p.flagged; }));
}

void flag_outliers(FitResult& f) {
  if (f.points.empty()) return;
  std::vector<double> e;
  for (const FitPoint& p : f.points) e.push_back(std::fabs(p.rel_error()));
  std::vector<double> sorted = e;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  const double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  for (std::size_t i = 0; i < n; ++i) f.points[i].flagged = e[i] > 0.25 || (e[i] > 3 * median && e[i] > 0.05);
}

Vec levenberg_marquardt(const std::function<Vec(const Vec&)>& residuals, Vec x0, const Vec& lo, const Vec& hi,
                        int max_iterations) {
  const auto n = static_cast<Eigen::Index>(x0.size());
  auto clamp = [&](Vec& x) {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::clamp(x[i], lo[i], hi[i]);
  };
  auto cost = [](const Vec& r) {
    double s = 0;
    for (double v : r) s += v * v;
    return s;
  };
  clamp(x0);
  Vec x = x0;
  Vec r = residuals(x);
  double c = cost(r);
  double lambda = 1e-3;
  for (int it = 0; it < max_iterations; ++it) {
    const auto m = static_cast<Eigen::Index>(r.size());
    Eigen::MatrixXd jac(m, n);
    for (Eigen::Index j = 0; j < n; ++j) {
      const double h = 1e-6 * std::max(1.0, std::fabs(x[static_cast<std::size_t>(j)]));
      Vec xp = x, xm = x;
      xp[static_cast<std::size_t>(j)] += h;
      xm[static_cast<std::size_t>(j)] -= h;
      const Vec rp = residuals(xp), rm = residuals(xm);
      for (Eigen::Index i = 0; i < m; ++i)
        jac(i, j) = (rp[static_cast<std::size_t>(i)] - rm[static_cast<std::size_t>(i)]) / (2 * h);
    }
    const Eigen::Map<const Eigen::VectorXd> rv(r.data(), m);
    const Eigen::MatrixXd jtj = jac.transpose() * jac;
    const Eigen::VectorXd g = jac.transpose() * rv;
    if (g.norm() < 1e-14) break;
    bool improved = false;
    for (int tries = 0; tries < 20 && !improved; ++tries) {
      Eigen::MatrixXd a = jtj;
      for (Eigen::Index j = 0; j < n; ++j) a(j, j) += lambda * std::max(jtj(j, j), 1e-12);
      const Eigen::VectorXd step = a.ldlt().solve(-g);
      Vec xn = x;
      for (Eigen::Index j = 0; j < n; ++j) xn[static_cast<std::size_t>(j)] += step(j);
      clamp(xn);
      const Vec rn = residuals(xn);
      const double cn = cost(rn);
      if (cn < c) {
        const double gain = c - cn;
        x = xn;
        r = rn;
        c = cn;
        lambda = std::max(lambda / 3, 1e-12);
        improved = true;
        if (gain < 1e-15 * std::max(c, 1e-30)) return x;
      } else {
        lambda *= 4;
      }
    }
    if (!improved) break;
  }
  return x;
}

namespace {

const ProfileKey& key_of(const std::string& pointer) {
  for (const ProfileKey& k : profile_keys()) {
    if (pointer == k.pointer) return k;
  }
  throw std::logic_error("no profile key " + pointer);
}

std::string fmt(const char* f, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, a);
  return buf;
}

std::string op_label(const OpCost& op) {
  std::string s = to_string(op.kind);
  if (op.m > 0 || op.n > 0 || op.k > 0) s += " " + fmt("%g", op.m) + "x" + fmt("%g", op.n) + "x" + fmt("%g", op.k);
  if (op.kind == OpKind::grouped_gemm) s += " g" + fmt("%g", op.groups);
  if (op.kind == OpKind::attention) s += " q" + fmt("%g", op.query_tokens) + " kv" + fmt("%g", op.kv_tokens);
  if (op.m == 0 && op.kind != OpKind::attention) s += " " + fmt("%g", op.bytes) + " B";
  s += std::string(" ") + to_string(op.dtype.value_or(Dtype::bf16));
  if (op.split_accumulator) s += " split";
  return s;
}

// Fits `pointers` (profile keys, each in log space within its bounds) so that `predict` over
// the profile matches the measured times; writes the values and their source into `p`.
FitResult fit_keys(const std::string& name, const std::string& formula, const std::vector<std::string>& pointers,
                   const std::vector<std::string>& labels, const std::vector<double>& measured, Profile& p,
                   const std::function<std::vector<double>(const Profile&)>& predict, const std::string& source) {
  FitResult f;
  f.name = name;
  f.formula = formula;
  if (measured.empty()) {
    f.note = "no measurements";
    return f;
  }
  Vec x0, lo, hi;
  for (const std::string& ptr : pointers) {
    const ProfileKey& k = key_of(ptr);
    const double v = *k.ref(p);
    const double kmin = std::max(k.min, 1e-6), kmax = k.max;
    x0.push_back(std::log(std::clamp(v, kmin, kmax)));
    lo.push_back(std::log(kmin));
    hi.push_back(std::log(kmax));
  }
  auto with = [&](const Vec& x) {
    Profile q = p;
    for (std::size_t i = 0; i < pointers.size(); ++i) *key_of(pointers[i]).ref(q) = std::exp(x[i]);
    return q;
  };
  auto residuals = [&](const Vec& x) {
    const std::vector<double> t = predict(with(x));
    Vec r(t.size());
    for (std::size_t i = 0; i < t.size(); ++i) r[i] = std::log(t[i] / measured[i]);
    return r;
  };
  const Vec x = levenberg_marquardt(residuals, x0, lo, hi);
  p = with(x);
  const std::vector<double> t = predict(p);
  for (std::size_t i = 0; i < measured.size(); ++i) f.points.push_back({labels[i], measured[i], t[i]});
  flag_outliers(f);
  for (std::size_t i = 0; i < pointers.size(); ++i) {
    f.values.emplace_back(pointers[i], std::exp(x[i]));
    if (std::fabs(x[i] - lo[i]) < 1e-9 || std::fabs(x[i] - hi[i]) < 1e-9)
      f.note += (f.note.empty() ? "" : "; ") + pointers[i] + " at its bound";
    p.sources[pointers[i]] = source + ": " + name + " fit over " + std::to_string(measured.size()) +
                             " measurements, rms error " + fmt("%.1f%%", 100 * f.rms_rel_error());
  }
  return f;
}

bool memory_bound_kind(OpKind k) {
  return k == OpKind::elementwise || k == OpKind::norm || k == OpKind::embedding || k == OpKind::loss ||
         k == OpKind::optimizer;
}

}  // namespace

std::vector<FitResult> fit_compute(const std::vector<OpMeasurement>& ops, const GpuSpec& gpu, Dtype dtype, Profile& p,
                                   const std::string& source) {
  std::vector<FitResult> out;
  auto subset = [&](auto pred) {
    std::vector<const OpMeasurement*> v;
    for (const OpMeasurement& o : ops) {
      if (o.stats.median_s > 0 && (o.op.flops > 0 || o.op.bytes > 0) && pred(o.op)) v.push_back(&o);
    }
    return v;
  };
  auto run = [&](const std::string& name, const std::string& formula, const std::vector<std::string>& keys,
                 const std::vector<const OpMeasurement*>& sel) {
    std::vector<std::string> labels;
    std::vector<double> measured;
    for (const OpMeasurement* o : sel) {
      labels.push_back(op_label(o->op));
      measured.push_back(o->stats.median_s);
    }
    auto predict = [&](const Profile& q) {
      const ComputeModel cm = compute_model(q, gpu, dtype);
      std::vector<double> t;
      for (const OpMeasurement* o : sel) t.push_back(op_seconds(cm, o->op));
      return t;
    };
    FitResult f = fit_keys(name, formula, keys, labels, measured, p, predict, source);
    out.push_back(std::move(f));
  };
  const auto is_fp8 = [&](const OpCost& op) { return op.dtype.value_or(dtype) == Dtype::fp8; };

  // Memory-bound kernels: t = launch + bytes / (hbm * hbm_efficiency) (compute at full peak).
  const auto mem = subset([](const OpCost& op) { return memory_bound_kind(op.kind); });
  std::set<double> sizes;
  for (const OpMeasurement* o : mem) sizes.insert(o->op.bytes);
  if (sizes.size() >= 2) {
    // A linear start: the alpha-beta fit of (bytes, t).
    std::vector<double> b, t;
    for (const OpMeasurement* o : mem) {
      b.push_back(o->op.bytes);
      t.push_back(o->stats.median_s);
    }
    // Without a linear start (sizes too close together, a zero time) the key fit starts from the
    // profile's own values.
    if (const auto ab = fit_alpha_beta(b, t)) {
      if (ab->alpha_s > 0) p.compute.kernel_launch_us = std::clamp(ab->alpha_s * 1e6, 1e-3, 1000.0);
      if (std::isfinite(ab->bandwidth_gbps) && ab->bandwidth_gbps > 0)
        p.compute.hbm_efficiency = std::clamp(ab->bandwidth_gbps / gpu.hbm_gbyte_per_s, 0.01, 1.0);
    }
    run("memory-bound", "t = launch + max(flops / peak, bytes / (hbm * hbm_efficiency))",
        {"/compute/kernel_launch_us", "/compute/hbm_efficiency"}, mem);
  } else {
    FitResult f;
    f.name = "memory-bound";
    f.note = "needs memory-bound ops (elementwise, norm, ...) of two sizes or more; launch and HBM kept";
    out.push_back(f);
  }
  const char* gemm_formula = "t = launch + flops / (peak * eff * prod d/(d+knee))";
  const auto gemms = subset([&](const OpCost& op) { return op.kind == OpKind::gemm && !is_fp8(op); });
  if (!gemms.empty()) run("gemm", gemm_formula, {"/compute/gemm_efficiency", "/compute/gemm_knee"}, gemms);
  const auto grouped = subset([&](const OpCost& op) { return op.kind == OpKind::grouped_gemm && !is_fp8(op); });
  if (!grouped.empty())
    run("grouped_gemm", "gemm's formula times grouped_gemm_efficiency, m split over the groups",
        {"/compute/grouped_gemm_efficiency"}, grouped);
  const auto attn = subset([](const OpCost& op) { return op.kind == OpKind::attention; });
  if (!attn.empty())
    run("attention", "t = launch + max(flops / (peak * gemm_efficiency * attention_ratio), bytes / hbm_rate)",
        {"/compute/attention_ratio"}, attn);
  const auto fp8 =
      subset([&](const OpCost& op) { return op.kind == OpKind::gemm && is_fp8(op) && !op.split_accumulator; });
  if (!fp8.empty()) run("fp8 gemm", "gemm's formula at the FP8 peak", {"/compute/fp8_gemm_efficiency"}, fp8);
  const auto split =
      subset([&](const OpCost& op) { return op.kind == OpKind::gemm && is_fp8(op) && op.split_accumulator; });
  if (!split.empty())
    run("fp8 gemm split accumulation", "fp8 gemm times fp8_split_accumulator_efficiency",
        {"/compute/fp8_split_accumulator_efficiency"}, split);
  return out;
}

FitResult fit_overlap(const std::vector<OverlapMeasurement>& overlaps, Profile& p, const std::string& source) {
  std::vector<std::string> labels;
  std::vector<double> measured, alone;
  for (const OverlapMeasurement& v : overlaps) {
    if (!(v.alone.median_s > 0) || !(v.overlapped.median_s > 0)) continue;
    labels.push_back(op_label(v.op) + " beside " + std::to_string(v.calls) + " x " + to_string(v.collective) + " " +
                     v.group + " " + fmt("%g", v.bytes) + " B");
    measured.push_back(v.overlapped.median_s);
    alone.push_back(v.alone.median_s);
  }
  FitResult f = fit_keys(
      "overlap", "t_overlapped = t_alone * (1 + overlap_slowdown)", {"/compute/overlap_slowdown"}, labels, measured, p,
      [&](const Profile& q) {
        std::vector<double> t;
        for (double a : alone) t.push_back(a * (1 + q.compute.overlap_slowdown));
        return t;
      },
      source);
  if (measured.empty()) f.note = "no overlap measurements (realrun writes them for layouts with collectives)";
  return f;
}

namespace {

bool spans(const std::vector<int>& ranks, int gpus_per_node) {
  for (int r : ranks) {
    if (r / gpus_per_node != ranks.front() / gpus_per_node) return true;
  }
  return false;
}

using GroupKey = std::tuple<CollectiveOp, int, bool>;

std::string group_name(const GroupKey& k) {
  return std::string(to_string(std::get<0>(k))) + " " + std::to_string(std::get<1>(k)) + " ranks " +
         (std::get<2>(k) ? "inter" : "intra");
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// (op, ranks, scope) -> bytes -> the measured medians at that size.
std::map<GroupKey, std::map<double, std::vector<double>>> by_group(const std::vector<CollectiveMeasurement>& cs,
                                                                   int gpus_per_node) {
  std::map<GroupKey, std::map<double, std::vector<double>>> g;
  for (const CollectiveMeasurement& c : cs) {
    if (!(c.stats.median_s > 0) || !(c.bytes > 0)) continue;
    g[{c.op, static_cast<int>(c.ranks.size()), spans(c.ranks, std::max(1, gpus_per_node))}][c.bytes].push_back(
        c.stats.median_s);
  }
  return g;
}

}  // namespace

std::vector<FitResult> fit_alpha_beta_groups(const std::vector<CollectiveMeasurement>& cs, int gpus_per_node) {
  std::vector<FitResult> out;
  for (const auto& [key, sizes] : by_group(cs, gpus_per_node)) {
    FitResult f;
    f.name = group_name(key);
    f.formula = "t = alpha + bytes / algbw";
    std::vector<double> b, t;
    for (const auto& [bytes, ts] : sizes) {
      b.push_back(bytes);
      t.push_back(median_of(ts));
    }
    if (b.size() < 2) {
      f.note = "one size only: no alpha-beta fit";
      out.push_back(f);
      continue;
    }
    const auto fit = fit_alpha_beta(b, t);
    if (!fit) {
      f.note = "sizes too close together: latency and bandwidth cannot be told apart";
      out.push_back(f);
      continue;
    }
    const AlphaBetaFit& ab = *fit;
    const double bf = bus_factor(std::get<0>(key), std::get<1>(key));
    f.values = {{"alpha_us", ab.alpha_s * 1e6},
                {"algbw_gbyte_per_s", ab.bandwidth_gbps},
                {"busbw_gbyte_per_s", ab.bandwidth_gbps * bf}};
    for (std::size_t i = 0; i < b.size(); ++i)
      f.points.push_back({fmt("%.0f B", b[i]), t[i], ab.alpha_s + b[i] / (ab.bandwidth_gbps * 1e9)});
    if (ab.alpha_s < 0) f.note = "negative latency: the curve is not alpha-beta shaped";
    flag_outliers(f);
    out.push_back(f);
  }
  return out;
}

std::vector<FitResult> fit_links(const std::vector<CollectiveMeasurement>& cs, const ClusterSpec& cluster, Profile& p,
                                 const std::string& source) {
  std::vector<FitResult> out;
  for (const bool inter : {false, true}) {
    std::vector<const CollectiveMeasurement*> sel;
    for (const CollectiveMeasurement& c : cs) {
      if (c.stats.median_s > 0 && c.bytes > 0 && spans(c.ranks, cluster.gpus_per_node) == inter) sel.push_back(&c);
    }
    if (sel.empty()) continue;
    // Bandwidth keys from the points where bytes dominate, latency keys from the smallest
    // messages: each key fitted where it matters, the ramp between them left to the model.
    std::vector<std::string> bw_keys, lat_keys;
    if (inter) {
      bw_keys = {"/links/nic_efficiency"};
      lat_keys = {"/links/net_latency_us"};
    } else if (cluster.intra == IntraNodeFabric::nvswitch) {
      bw_keys = {"/links/nvlink_efficiency"};
      lat_keys = {"/links/nvlink_latency_us"};
      // NVSwitch nodes that reduce in the switch run all-reduce as NVLS at its own share.
      if (p.links.nvls_efficiency > 0) {
        bw_keys.push_back("/links/nvls_efficiency");
        lat_keys.push_back("/nccl/nvls_latency_us");
      }
    } else {
      bw_keys = {"/links/pcie_efficiency"};
      lat_keys = {"/links/pcie_latency_us"};
    }
    const int gpus = cluster.nodes * cluster.gpus_per_node;
    bool fits = true;
    // Per (op, group size): the fastest time and the largest size measured.
    std::map<std::pair<CollectiveOp, std::size_t>, double> fastest, largest;
    for (const CollectiveMeasurement* c : sel) {
      for (int r : c->ranks) fits = fits && r < gpus;
      auto [it, fresh] = fastest.try_emplace({c->op, c->ranks.size()}, c->stats.median_s);
      it->second = std::min(it->second, c->stats.median_s);
      auto [jt, unused] = largest.try_emplace({c->op, c->ranks.size()}, c->bytes);
      jt->second = std::max(jt->second, c->bytes);
    }
    const std::string name = inter ? "links inter-node" : "links intra-node";
    if (!fits) {
      FitResult f;
      f.name = name;
      f.note = "a measured rank is outside the scenario's cluster: link keys kept";
      out.push_back(f);
      continue;
    }
    std::vector<const CollectiveMeasurement*> bw, lat;
    for (const CollectiveMeasurement* c : sel) {
      const double t0 = fastest[{c->op, c->ranks.size()}];
      // The asymptotic rate shows best in the largest messages: the top two octaves measured,
      // where they take 8x the fastest call or more.
      if (c->stats.median_s >= 8 * t0 && c->bytes * 4 >= largest[{c->op, c->ranks.size()}]) bw.push_back(c);
      if (c->stats.median_s <= 2 * t0) lat.push_back(c);
    }
    if (bw.empty()) bw = sel;
    if (lat.empty()) lat = sel;
    auto run = [&](const std::vector<const CollectiveMeasurement*>& subset, const std::vector<std::string>& keys,
                   const std::string& fit_name) {
      std::vector<std::string> labels;
      std::vector<double> measured;
      for (const CollectiveMeasurement* c : subset) {
        labels.push_back(std::string(to_string(c->op)) + " " + std::to_string(c->ranks.size()) + " ranks " +
                         fmt("%.0f B", c->bytes));
        measured.push_back(c->stats.median_s);
      }
      auto predict = [&](const Profile& q) {
        ClusterSpec s = cluster;
        apply_profile(q, s);
        const Cluster cl = build_cluster(s);
        std::vector<double> t;
        for (const CollectiveMeasurement* c : subset) {
          CollectiveCall call{c->op, {}, c->bytes};
          for (int r : c->ranks) call.ranks.push_back(GpuId(static_cast<std::uint32_t>(r)));
          t.push_back(analytical_collective_time(cl, call, {}).seconds());
        }
        return t;
      };
      return fit_keys(fit_name, "analytical_collective_time", keys, labels, measured, p, predict, source);
    };
    // Twice round: the small messages' time holds a little bandwidth term and the large ones'
    // a little latency.
    FitResult fb, fl;
    for (int round = 0; round < 2; ++round) {
      fb = run(bw, bw_keys, name + " bandwidth");
      fl = run(lat, lat_keys, name + " latency");
    }
    // One row: both keys' values, the residuals over every point at the fitted values.
    FitResult f;
    f.name = name;
    f.formula =
        "analytical_collective_time: efficiency on the top two octaves (>= 8x the fastest time), hop latency on <= 2x";
    f.values = fb.values;
    f.values.insert(f.values.end(), fl.values.begin(), fl.values.end());
    f.note = fb.note + (fb.note.empty() || fl.note.empty() ? "" : "; ") + fl.note;
    const FitResult all = run(sel, {}, name);
    f.points = all.points;
    flag_outliers(f);
    out.push_back(f);
  }
  return out;
}

MeasuredTables measured_tables(const Measurements& m, int gpus_per_node) {
  MeasuredTables t;
  for (const auto& [key, sizes] : by_group(m.collectives, gpus_per_node)) {
    MeasuredCollective c;
    std::tie(c.op, c.ranks, c.inter_node) = key;
    for (const auto& [bytes, ts] : sizes) c.points.emplace_back(bytes, median_of(ts));
    t.collectives.push_back(std::move(c));
  }
  std::map<KernelShapeKey, std::pair<OpCost, std::vector<double>>> kernels;
  for (const OpMeasurement& o : m.ops) {
    if (!(o.stats.median_s > 0)) continue;
    auto& e = kernels[kernel_shape_key(o.op, Dtype::bf16)];
    e.first = o.op;
    e.second.push_back(o.stats.median_s);
  }
  for (const auto& [key, e] : kernels) t.kernels.push_back({e.first, median_of(e.second)});
  return t;
}

}  // namespace ctwin::calibrate
