// Prefix caching: the block table alone (chain hashing, pins, LRU slot choice, eviction) and the continuous
// batcher with it on, over FakeGenerationBackend (logits depend on everything a slot holds, so a reused block in
// the wrong place, or a copy from an overwritten slot, changes the tokens) and a FakeClock.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "scheduler/continuous_batcher.h"
#include "scheduler/prefix_block_table.h"
#include "tests/scheduler/fake_generation_backend.h"
#include "tests/scheduler/scheduler_test_util.h"

namespace sluice {
namespace {

using ::sluice::testing::FakeDecoder;
using ::sluice::testing::FakeGenerationBackend;
using ::testing::IsEmpty;

std::vector<int32_t> Tokens(int n, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(3 + (salt * 7 + i * 13 + salt * i) % 61);
  return t;
}
std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(PrefixBlockTableTest, ChainHashesIdentifyABlockByItsTokensAndEveryEarlierOne) {
  const std::vector<int32_t> a = Tokens(20, 1);
  const std::vector<uint64_t> h = PrefixBlockTable::ChainHashes(a, 8);
  ASSERT_EQ(h.size(), 2u);  // the trailing 4 tokens make no block
  std::vector<int32_t> b = a;
  b[0] += 1;  // block 1's tokens are equal, block 0's are not
  const std::vector<uint64_t> g = PrefixBlockTable::ChainHashes(b, 8);
  EXPECT_NE(g[0], h[0]);
  EXPECT_NE(g[1], h[1]) << "block 1 chains block 0's hash";
  EXPECT_EQ(PrefixBlockTable::ChainHashes(Concat(Tokens(16, 1), Tokens(9, 5)), 8)[1], h[1]);
}

TEST(PrefixBlockTableTest, LookupFindsTheLongestCachedRunUpToItsLimit) {
  PrefixBlockTable table(2, 64, 8);
  const std::vector<uint64_t> h = PrefixBlockTable::ChainHashes(Tokens(32, 1), 8);
  table.Claim(0, {});
  for (int i = 0; i < 3; ++i) table.Register(0, i, h[i]);
  EXPECT_EQ(table.Lookup(h, 8).blocks.size(), 3u);
  EXPECT_EQ(table.Lookup(h, 2).blocks.size(), 2u);
  std::vector<uint64_t> other = h;
  other[1] = 42;
  EXPECT_EQ(table.Lookup(other, 8).blocks.size(), 1u) << "a run stops at the first block not cached";
  EXPECT_EQ(table.counters().blocks_used, 3);
  EXPECT_EQ(table.counters().blocks_total, 16);
}

TEST(PrefixBlockTableTest, AFreeSlotIsChosenLeastRecentlyUsedFirstAndClaimingEvictsWhatItDoesNotReuse) {
  PrefixBlockTable table(3, 64, 8);
  const std::vector<uint64_t> a = PrefixBlockTable::ChainHashes(Tokens(16, 1), 8);
  const std::vector<uint64_t> b = PrefixBlockTable::ChainHashes(Tokens(16, 2), 8);
  table.Claim(0, {});
  table.Register(0, 0, a[0]);
  table.Register(0, 1, a[1]);
  table.Claim(1, {});
  table.Register(1, 0, b[0]);
  EXPECT_EQ(table.ChooseSlot({0, 1, 2}, {}), 2) << "a slot holding nothing goes first";
  table.Unpin(table.Lookup(a, 2));  // a is now the more recently used
  EXPECT_EQ(table.ChooseSlot({0, 1}, {}), 1);
  table.Claim(1, {});
  EXPECT_EQ(table.counters().evictions, 1);
  EXPECT_TRUE(table.Lookup(b, 2).blocks.empty());
  // A hit takes its own slot when that one is free, keeping its blocks there (no copy) and evicting the rest.
  const PrefixHit hit = table.Lookup(a, 1);
  EXPECT_EQ(table.ChooseSlot({0, 2}, hit), 0);
  table.Claim(0, hit);
  table.Unpin(hit);
  EXPECT_EQ(table.counters().evictions, 2);  // a[1]: the new sequence overwrites block 1
  EXPECT_EQ(table.Lookup(a, 2).blocks.size(), 1u);
}

TEST(PrefixBlockTableTest, ASlotHoldingABlockAPendingHitWillCopyIsNeverHandedOut) {
  PrefixBlockTable table(2, 64, 8);
  const std::vector<uint64_t> a = PrefixBlockTable::ChainHashes(Tokens(16, 1), 8);
  table.Claim(0, {});
  table.Register(0, 0, a[0]);
  const PrefixHit pending = table.Lookup(a, 1);  // to be copied out of slot 0 into another
  ASSERT_EQ(pending.blocks.size(), 1u);
  EXPECT_EQ(table.ChooseSlot({0}, {}), -1) << "slot 0 would be overwritten before the copy ran";
  EXPECT_EQ(table.ChooseSlot({0, 1}, {}), 1);
  table.Unpin(pending);
  EXPECT_EQ(table.ChooseSlot({0}, {}), 0);
}

// Vocabulary 64, context 64, blocks of 8, chunks of 8; 2 slots.
class PrefixCacheBatcherTest : public ::testing::Test {
 protected:
  PrefixCacheBatcherTest() {
    model_.name = "fake_llm";
    model_.kind = ModelKind::kGeneration;
    GenerationOptions gen;
    gen.vocab_size = 64;
    gen.context_length = 64;
    gen.kv_cache = {2, 1, 1, 4};
    gen.prefill_lengths = {8, 16, 32};
    gen.decode_batch_sizes = {1, 2};
    gen.kv_lengths = {16, 32, 64};
    gen.bos_token_id = 1;
    gen.eos_token_id = 2;
    gen.max_num_seqs = 2;
    gen.prefill_token_budget = 32;
    gen.max_queue_size = 8;
    gen.default_max_tokens = 8;
    gen.prefill_chunk_lengths = {8};
    gen.iteration_token_budget = 10;
    gen.prefix_cache_block_size = 8;
    model_.generation = gen;
    backend_ = std::make_unique<FakeGenerationBackend>(*model_.generation, decoder_, &clock_);
    ContinuousBatcherOptions options;
    options.model = &model_;
    options.instances = {backend_.get()};
    options.clock = &clock_;
    batcher_ = *ContinuousBatcher::Create(options);
  }
  ~PrefixCacheBatcherTest() override {
    batcher_->Stop();
    EXPECT_THAT(backend_->violations(), IsEmpty());
  }

  struct Run {
    std::vector<int32_t> tokens;
    int64_t cached = -1;
    testing::Event done;
  };
  std::shared_ptr<Run> Submit(std::vector<int32_t> prompt, int max_tokens) {
    auto run = std::make_shared<Run>();
    GenerationRequest request;
    request.prompt = std::move(prompt);
    request.max_tokens = max_tokens;
    request.ignore_eos = true;
    request.on_token = [run](const GeneratedToken& t) {  // one engine thread: no lock needed until done
      if (t.index == 0) run->cached = t.cached_prompt_tokens;
      run->tokens.push_back(t.id);
      return true;
    };
    request.on_done = [run](GenerationResult) { run->done.Notify(); };
    EXPECT_TRUE(batcher_->Enqueue(std::move(request)).ok());
    return run;
  }
  std::vector<int32_t> Cold(std::vector<int32_t> prompt, int max_tokens) {
    FakeDecoder plain = decoder_;
    return plain.Greedy(std::move(prompt), max_tokens);
  }

  ModelConfig model_;
  FakeDecoder decoder_;
  FakeClock clock_;
  std::unique_ptr<FakeGenerationBackend> backend_;
  std::unique_ptr<ContinuousBatcher> batcher_;
};

TEST_F(PrefixCacheBatcherTest, ASecondPromptWithTheSamePrefixReusesItsBlocksInPlaceAndGetsTheColdTokens) {
  const std::vector<int32_t> system = Tokens(19, 1);  // 2 full blocks
  const std::vector<int32_t> first = Concat(system, Tokens(5, 2)), second = Concat(system, Tokens(7, 3));
  auto a = Submit(first, 4);
  ASSERT_TRUE(a->done.WaitForNotificationWithTimeout(absl::Seconds(20)));
  auto b = Submit(second, 4);
  ASSERT_TRUE(b->done.WaitForNotificationWithTimeout(absl::Seconds(20)));
  EXPECT_EQ(a->cached, 0);
  EXPECT_EQ(a->tokens, Cold(first, 4));
  EXPECT_EQ(b->cached, 16);
  EXPECT_EQ(b->tokens, Cold(second, 4));
  EXPECT_THAT(backend_->copies(), IsEmpty()) << "the finished sequence's slot was free: reused where it lies";
  const PrefixCacheCounters c = batcher_->PrefixCache();
  EXPECT_EQ(c.lookups, 2);
  EXPECT_EQ(c.hits, 1);
  EXPECT_EQ(c.hit_blocks, 2);
}

TEST_F(PrefixCacheBatcherTest, AHitWhoseBlocksLiveInARunningSequencesSlotCopiesThemAndGetsTheColdTokens) {
  const std::vector<int32_t> system = Tokens(17, 4);
  const std::vector<int32_t> first = Concat(system, Tokens(3, 5)), second = Concat(system, Tokens(9, 6));
  backend_->HoldFromCall(4);  // a's chunks (8, 8, 4) ran: its first decode step waits
  auto a = Submit(first, 30);
  ASSERT_TRUE(testing::Eventually([&] { return backend_->blocked() == 1; }));
  EXPECT_EQ(batcher_->PrefixCache().blocks_used, 2);
  auto b = Submit(second, 4);
  backend_->Release();
  ASSERT_TRUE(b->done.WaitForNotificationWithTimeout(absl::Seconds(20)));
  ASSERT_TRUE(a->done.WaitForNotificationWithTimeout(absl::Seconds(20)));
  EXPECT_EQ(b->cached, 16);
  EXPECT_EQ(b->tokens, Cold(second, 4));
  EXPECT_EQ(a->tokens, Cold(first, 30));
  ASSERT_EQ(backend_->copies().size(), 1u);
  EXPECT_EQ(backend_->copies()[0].start, 0);
  EXPECT_EQ(backend_->copies()[0].length, 16);
}

}  // namespace
}  // namespace sluice
