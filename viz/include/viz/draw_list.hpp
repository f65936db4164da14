// A frame as plain data: rectangles, lines and texts in pixel coordinates, which a front end
// (the GL viewer) only has to draw in order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/trace.hpp"

namespace ctwin::viz {

enum class ItemKind : std::uint8_t {
  background,    // canvas, lane and label backgrounds
  event,         // one op: `event` is its index in Trace::events
  merged,        // `count` ops folded together, first is `event`: the run's extent (background)
  share,         // one kind's time share of a merged run, stacked bottom up (`index` is the kind)
  exposed,       // the exposed part of a communication op (drawn over its faded rect)
  group_header,  // `index` is the group
  summary,       // utilization bar of a collapsed group (`index` is the group)
  counter,       // counter bar (`index` is the counter track)
  axis,
  minimap,
  overlay,  // selection, hover and search outlines
};

struct DrawRect {
  float x0, y0, x1, y1;
  std::uint32_t color;
  ItemKind kind;
  bool filled = true;  // false: outline only
  std::uint32_t event = kNoIndex;
  std::uint32_t count = 0;  // ops covered (event, merged)
  std::uint32_t index = kNoIndex;
};

struct DrawLine {
  float x0, y0, x1, y1;
  std::uint32_t color;
  float thickness;
  bool arrow_head = false;  // a head at (x1, y1)
};

struct DrawText {
  float x, y;
  std::uint32_t color;
  float clip_x0, clip_x1;        // drawn clipped to [clip_x0, clip_x1)
  std::uint32_t offset, length;  // into DrawList::text
};

struct DrawList {
  std::vector<DrawRect> rects;  // in draw order
  std::vector<DrawLine> lines;  // drawn after the rects
  std::vector<DrawText> texts;  // drawn last
  std::string text;             // the characters of all texts

  void clear();  // empties the lists, keeping their capacity: no allocation per frame once warm
  std::string_view text_of(const DrawText& t) const { return std::string_view(text).substr(t.offset, t.length); }
  void add_text(float x, float y, std::uint32_t color, float clip_x0, float clip_x1, std::string_view s);
};

}  // namespace ctwin::viz
