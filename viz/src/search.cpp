// Search by op name: which strings and events match, and stepping through the matches in time.
#include <algorithm>
#include <string>
#include <tuple>

#include "viz/timeline_model.hpp"

namespace ctwin::viz {

std::size_t TimelineModel::set_search(std::string_view needle) {
  search_ = needle;
  matches_.clear();
  name_match_.assign(trace_.strings.size(), 0);
  if (needle.empty()) return 0;
  bool any = false;
  for (std::size_t s = 0; s < trace_.strings.size(); ++s) {
    name_match_[s] = trace_.strings[s].find(needle) != std::string::npos;
    any = any || name_match_[s];
  }
  if (!any) return 0;
  const auto& ev = trace_.events;
  for (std::size_t i = 0; i < ev.size(); ++i) {
    if (name_match_[ev[i].name]) matches_.push_back(static_cast<std::uint32_t>(i));
  }
  std::stable_sort(matches_.begin(), matches_.end(), [&ev](std::uint32_t a, std::uint32_t b) {
    return std::tie(ev[a].start_ps, ev[a].lane) < std::tie(ev[b].start_ps, ev[b].lane);
  });
  return matches_.size();
}

std::uint32_t TimelineModel::next_match(double t, bool forward) const {
  if (matches_.empty()) return kNoIndex;
  const auto& ev = trace_.events;
  if (forward) {
    auto it = std::partition_point(matches_.begin(), matches_.end(),
                                   [&](std::uint32_t i) { return static_cast<double>(ev[i].start_ps) <= t; });
    return it == matches_.end() ? matches_.front() : *it;
  }
  auto it = std::partition_point(matches_.begin(), matches_.end(),
                                 [&](std::uint32_t i) { return static_cast<double>(ev[i].start_ps) < t; });
  return it == matches_.begin() ? matches_.back() : *(it - 1);
}

}  // namespace ctwin::viz
