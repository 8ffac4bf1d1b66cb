// sluice-bench-sampler: what the generation engine's Sampler costs per row of logits, the host time a decode step
// spends between device steps (rows x this). Rows of two shapes per vocabulary size: "peaked" (two high logits,
// the rest 0, as the sim's llm_sim answers) and "spread" (normal(0, 3) logits, closer to a trained model's). Prints
// the median and range over --repeats timed passes of --rows rows each.
// A benchmark, not a test: numbers vary with the machine; compare settings measured in one run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "CLI/CLI.hpp"
#include "backend/sampler.h"

namespace sluice {
namespace {

std::vector<std::vector<float>> Rows(bool peaked, int vocab, int rows) {
  std::mt19937 rng(1);
  std::normal_distribution<float> spread(0.0f, 3.0f);
  std::vector<std::vector<float>> out(rows, std::vector<float>(vocab, 0.0f));
  for (int r = 0; r < rows; ++r) {
    if (peaked) {
      out[r][(r * 7) % vocab] = 20.0f;
      out[r][(r * 7 + 1) % vocab] = 19.0f;
    } else {
      for (float& v : out[r]) v = spread(rng);
    }
  }
  return out;
}

int Main(int argc, char** argv) {
  CLI::App app{"sluice-bench-sampler: the Sampler's cost per row of logits (host time per decode row)"};
  std::vector<int> vocabs = {2000, 49152, 128256};
  int rows = 16, repeats = 5;
  TokenPick params;
  params.temperature = 1.0f;
  app.add_option("--vocab", vocabs, "vocabulary sizes (a comma-separated list)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  app.add_option("--rows", rows, "rows per timed pass (a decode step's batch)")->check(CLI::PositiveNumber);
  app.add_option("--repeats", repeats, "timed passes; the median and range are printed")->check(CLI::PositiveNumber);
  app.add_option("--temperature", params.temperature, "0: greedy")->check(CLI::NonNegativeNumber);
  app.add_option("--top-k", params.top_k, "0: no cut-off")->check(CLI::NonNegativeNumber);
  app.add_option("--top-p", params.top_p, "1: no cut-off")->check(CLI::Range(1e-6, 1.0));
  CLI11_PARSE(app, argc, argv);

  std::printf("temperature %g, top_k %d, top_p %g, %d rows a pass\n", params.temperature, params.top_k,
              params.top_p, rows);
  std::printf("%8s %-7s %14s %22s\n", "vocab", "logits", "us/row median", "(min-max)");
  for (int vocab : vocabs) {
    for (bool peaked : {true, false}) {
      const std::vector<std::vector<float>> logits = Rows(peaked, vocab, rows);
      // Passes per timed repeat: ~400k logits sampled whatever the vocabulary.
      const int passes = std::max(1, 400000 / vocab);
      std::vector<double> per_row;
      int64_t checksum = 0;  // printed, so the draws are not optimised away
      for (int repeat = 0; repeat < repeats; ++repeat) {
        Sampler sampler;
        std::mt19937_64 rng(5);
        const auto start = std::chrono::steady_clock::now();
        for (int p = 0; p < passes; ++p) {
          for (const auto& row : logits) checksum += sampler.Sample(row, params, rng);
        }
        const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
        per_row.push_back(took.count() / (static_cast<double>(passes) * rows));
      }
      std::sort(per_row.begin(), per_row.end());
      std::printf("%8d %-7s %14.1f %10.1f-%.1f   (ids drawn sum to %lld)\n", vocab, peaked ? "peaked" : "spread",
                  per_row[per_row.size() / 2], per_row.front(), per_row.back(), static_cast<long long>(checksum));
    }
  }
  return 0;
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) { return sluice::Main(argc, argv); }
