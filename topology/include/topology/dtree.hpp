// NCCL's double binary tree over `n` ranks (Sanders, Speck and Traeff 2009, as NCCL builds it in
// src/graph/trees.cc): tree 0 is a binary tree in which rank r's parent clears r's lowest set bit
// and sets the next one; tree 1 mirrors it (n even) or shifts it by one (n odd), so every rank is
// a leaf in at least one tree and the two trees together load each rank's links evenly.
#pragma once

namespace ctwin {

struct DtreeLinks {
  int up = -1;     // parent, -1 at the root
  int down0 = -1;  // children, -1 where absent
  int down1 = -1;
};

inline DtreeLinks btree(int n, int rank) {
  DtreeLinks l;
  int bit = 1;
  while (bit < n && !(bit & rank)) bit <<= 1;
  if (rank == 0) {
    l.down1 = n > 1 ? bit >> 1 : -1;  // the root has one child
    return l;
  }
  int up = (rank ^ bit) | (bit << 1);
  if (up >= n) up = rank ^ bit;
  l.up = up;
  int low = bit >> 1;
  l.down0 = low == 0 ? -1 : rank - low;
  int down1 = low == 0 ? -1 : rank + low;
  while (down1 >= n) {
    low >>= 1;
    down1 = low == 0 ? -1 : rank + low;
  }
  l.down1 = down1;
  return l;
}

inline DtreeLinks dtree(int n, int rank, int tree) {
  if (tree == 0) return btree(n, rank);
  auto map = [&](int r, bool to_tree) {
    if (r < 0) return -1;
    if (n % 2 == 1) return to_tree ? (r - 1 + n) % n : (r + 1) % n;  // shift by one
    return n - 1 - r;                                                // mirror
  };
  DtreeLinks t = btree(n, map(rank, true));
  return DtreeLinks{map(t.up, false), map(t.down0, false), map(t.down1, false)};
}

}  // namespace ctwin
