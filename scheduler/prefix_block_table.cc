#include "scheduler/prefix_block_table.h"

#include <algorithm>
#include <limits>

namespace sluice {
namespace {

// splitmix64's finalizer: a cheap 64-bit mix with good avalanche. A block's identity is a 64-bit value, so two
// different prefixes collide with probability ~ n^2 / 2^65 for n cached blocks (about 1e-12 for 10^4 blocks).
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

PrefixBlockTable::PrefixBlockTable(int slots, int64_t positions_per_slot, int block_size)
    : block_size_(block_size), blocks_per_slot_(positions_per_slot / block_size), slots_(slots) {
  counters_.blocks_total = blocks_per_slot_ * slots;
}

std::vector<uint64_t> PrefixBlockTable::ChainHashes(std::span<const int32_t> tokens, int block_size) {
  std::vector<uint64_t> hashes;
  uint64_t chain = 0x5115ce;  // the hash "before" block 0
  for (size_t begin = 0; begin + block_size <= tokens.size(); begin += block_size) {
    uint64_t h = Mix(chain);
    for (size_t i = begin; i < begin + block_size; ++i) h = Mix(h ^ static_cast<uint32_t>(tokens[i]));
    hashes.push_back(h);
    chain = h;
  }
  return hashes;
}

void PrefixBlockTable::Touch(Entry& entry) {
  entry.last_used = ++clock_;
  slots_[entry.slot].last_used = entry.last_used;
}

PrefixHit PrefixBlockTable::Lookup(std::span<const uint64_t> hashes, int max_blocks) {
  PrefixHit hit;
  const size_t limit = std::min(hashes.size(), static_cast<size_t>(std::max(max_blocks, 0)));
  for (size_t i = 0; i < limit; ++i) {
    auto it = blocks_.find(hashes[i]);
    if (it == blocks_.end()) break;
    Entry& entry = it->second;
    ++entry.pins;
    Touch(entry);
    hit.blocks.push_back({hashes[i], entry.slot, entry.index});
  }
  return hit;
}

void PrefixBlockTable::CountLookup(const PrefixHit& hit) {
  ++counters_.lookups;
  if (hit.blocks.empty()) return;
  ++counters_.hits;
  counters_.hit_blocks += static_cast<int64_t>(hit.blocks.size());
}

void PrefixBlockTable::Unpin(const PrefixHit& hit) {
  for (const CachedBlock& block : hit.blocks) {
    auto it = blocks_.find(block.hash);
    if (it != blocks_.end() && it->second.pins > 0) --it->second.pins;
  }
}

bool PrefixBlockTable::InHit(const PrefixHit& hit, uint64_t hash) {
  return std::any_of(hit.blocks.begin(), hit.blocks.end(), [hash](const CachedBlock& b) { return b.hash == hash; });
}

// A pinned block of `slot` that `hit` does not reuse in place would be overwritten by the new sequence.
bool PrefixBlockTable::HasPinnedBlockOutside(int slot, const PrefixHit& hit) const {
  for (uint64_t hash : slots_[slot].hashes) {
    const Entry& entry = blocks_.at(hash);
    if (entry.pins == 0) continue;
    // Pinned by this very hit only (one pin) and reused in place: not overwritten.
    if (entry.pins == 1 && InHit(hit, hash)) continue;
    return true;
  }
  return false;
}

int PrefixBlockTable::ChooseSlot(const std::set<int>& free_slots, const PrefixHit& hit) const {
  if (!hit.blocks.empty()) {
    const int home = hit.blocks.front().slot;
    if (free_slots.contains(home) && !HasPinnedBlockOutside(home, hit)) return home;
  }
  int best = -1;
  uint64_t best_used = std::numeric_limits<uint64_t>::max();
  for (int slot : free_slots) {  // ascending: ties go to the lowest slot
    if (HasPinnedBlockOutside(slot, hit)) continue;
    if (slots_[slot].last_used < best_used) {
      best = slot;
      best_used = slots_[slot].last_used;
    }
  }
  return best;
}

void PrefixBlockTable::Claim(int slot, const PrefixHit& hit) {
  SlotState& state = slots_[slot];
  std::vector<uint64_t> kept;
  for (uint64_t hash : state.hashes) {
    if (InHit(hit, hash)) {
      kept.push_back(hash);
      continue;
    }
    blocks_.erase(hash);
    ++counters_.evictions;
  }
  state.hashes = std::move(kept);
}

void PrefixBlockTable::Register(int slot, int index, uint64_t hash) {
  if (index >= blocks_per_slot_ || blocks_.contains(hash)) return;
  Entry& entry = blocks_[hash];
  entry.slot = slot;
  entry.index = index;
  slots_[slot].hashes.push_back(hash);
  Touch(entry);
}

PrefixCacheCounters PrefixBlockTable::counters() const {
  PrefixCacheCounters c = counters_;
  c.blocks_used = static_cast<int64_t>(blocks_.size());
  return c;
}

}  // namespace sluice
