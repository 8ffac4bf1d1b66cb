// Prefix caching's bookkeeping for one instance's static KV cache: which full blocks of prompt tokens are held
// where, so that a new prompt whose leading blocks are already in the cache gets them into its slot (in place, or
// by a device-side copy) and prefills only the rest.
//
// The cache stays one region per slot (no paged attention): block i of a slot is its positions
// [i * block_size, (i + 1) * block_size). A block is identified by a chain hash: hash(block i's tokens,
// hash of block i - 1), so equal hashes mean equal tokens at every earlier position too, and a block only ever
// matches at its own index. Blocks live in the slots of running sequences and, after a sequence finishes, in its
// free slot until that slot is given to another sequence (then the blocks it does not reuse are evicted).
//
// Reference counts: a block is pinned (counted once per pending hit) while a hit that will copy it or reuse it in
// place is pending (Lookup .. Unpin); a slot that belongs to a running sequence is never free, so its blocks
// cannot be evicted while it runs (they stay readable: a sequence never rewrites its own prompt). ChooseSlot never hands out a slot holding a pinned block
// that the new sequence does not itself reuse, so a hit's source cannot be overwritten before its copy ran.
// Eviction is LRU at slot granularity: among free, unpinned slots the one whose blocks were used least recently
// goes first (a slot holding no block first of all, then the lowest index).
//
// Thread-safety: none; the continuous batcher uses it under its mutex.
#pragma once

#include <cstdint>
#include <set>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace sluice {

// Where a cached block lives: its slot; its index is its position in the chain.
struct CachedBlock {
  uint64_t hash = 0;
  int slot = -1;
  int index = 0;
};

// A lookup's result: the first `blocks.size()` blocks of the prompt, in order.
struct PrefixHit {
  std::vector<CachedBlock> blocks;
  int64_t tokens(int block_size) const { return static_cast<int64_t>(blocks.size()) * block_size; }
};

struct PrefixCacheCounters {
  int64_t lookups = 0;
  int64_t hits = 0;        // lookups that found at least one block
  int64_t hit_blocks = 0;  // blocks reused, over all hits
  int64_t evictions = 0;   // blocks dropped because their slot was given to another sequence
  int64_t blocks_used = 0;
  int64_t blocks_total = 0;
};

class PrefixBlockTable {
 public:
  // REQUIRES: slots >= 1, block_size >= 1, positions_per_slot >= block_size.
  PrefixBlockTable(int slots, int64_t positions_per_slot, int block_size);

  // The chain hashes of the full blocks of `tokens` (a trailing partial block has none).
  static std::vector<uint64_t> ChainHashes(std::span<const int32_t> tokens, int block_size);

  int block_size() const { return block_size_; }

  // The longest run of cached blocks matching `hashes` from block 0, at most max_blocks; each found block is
  // pinned (Unpin once its copy ran or the admission was given up) and marked used now.
  PrefixHit Lookup(std::span<const uint64_t> hashes, int max_blocks);
  void Unpin(const PrefixHit& hit);
  // Counts one lookup (and a hit when `hit` has blocks): called once per admitted sequence, not per retry.
  void CountLookup(const PrefixHit& hit);

  // The slot a sequence with `hit` should take out of `free_slots`: the slot its hit's first block lives in when
  // that one is free and holds no block pinned by someone else (in place: no copy of those blocks), else the
  // least recently used free slot with no pinned block. -1: every free slot holds a pinned block (wait).
  int ChooseSlot(const std::set<int>& free_slots, const PrefixHit& hit) const;

  // `slot` now belongs to a running sequence: its blocks that are not in `hit` are evicted (they are about to be
  // overwritten), those in `hit` stay, held by it. REQUIRES: ChooseSlot returned `slot` for `hit`.
  void Claim(int slot, const PrefixHit& hit);
  // The running sequence in `slot` wrote block `index`, whose chain hash is `hash`. A hash already cached
  // elsewhere is not entered twice (the first copy serves every hit).
  void Register(int slot, int index, uint64_t hash);

  PrefixCacheCounters counters() const;

 private:
  struct Entry {
    int slot = -1;
    int index = 0;
    int pins = 0;
    uint64_t last_used = 0;
  };
  struct SlotState {
    std::vector<uint64_t> hashes;  // blocks cached in this slot
    uint64_t last_used = 0;        // the newest last_used of its blocks (0: none ever)
  };
  bool HasPinnedBlockOutside(int slot, const PrefixHit& hit) const;
  static bool InHit(const PrefixHit& hit, uint64_t hash);
  void Touch(Entry& entry);

  const int block_size_;
  const int64_t blocks_per_slot_;
  std::vector<SlotState> slots_;
  absl::flat_hash_map<uint64_t, Entry> blocks_;
  uint64_t clock_ = 0;  // a use counter: LRU order
  PrefixCacheCounters counters_;
};

}  // namespace sluice
