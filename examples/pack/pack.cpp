// packswap-pack: packs a workload preset or a CSV of per-sample statistics with the 1D greedy
// packer, the 2D budgeted packer, or both side by side, and reports packing efficiency and the
// spread of image tokens per pack (the vision encoder's load). Run with --help.
#include "../common/cli.hpp"

#include <packswap/packing/budgeted_packer.hpp>
#include <packswap/packing/greedy_packer.hpp>
#include <packswap/packing/metrics.hpp>
#include <packswap/packing/sample_csv.hpp>
#include <packswap/packing/workload.hpp>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace {

constexpr const char* usage = R"(usage: packswap-pack [options]

Packs samples into fixed-capacity packs and reports packing efficiency (real tokens / (packs x
capacity)) and the image tokens per pack (min, median, p90, p99, max: nearest rank).

input (one of):
  --preset NAME     a built-in workload (default vlm-pretrain; see the list below)
  --samples N       samples to draw from the preset (default 100000)
  --seed S          the preset's seed (default 1)
  --csv FILE        per-sample statistics: header tokens,images,documents; images and documents
                    are ';'-separated token counts, e.g. "2100,1024;256," (see sample_csv.hpp)
packing:
  --packer 1d|2d    1d: greedy best fit on tokens; 2d: also an image-token budget per pack.
                    Default: both, side by side, plus a sweep of the 2D budget
  --capacity N      tokens per pack (default 8192)
  --budget N        2D image-token budget per pack (default: the mean image tokens per pack of
                    the 1D packing of the same samples)
  --buffer N        candidate buffer, in samples (default 1000)
  --lookahead N     sizes tried for a better-filling pair before a pack closes (default 16)
  --oversize skip|reject
                    a sample over the capacity (or the budget): left out and counted (default),
                    or an error
output:
  --json            one JSON object per packer instead of the report:
                    {"packer":"1d", "samples":N, "packs":N, "efficiency":F,
                     "image_tokens_per_pack":{"min":N, "median":N, "p90":N, "p99":N, "max":N}}
                    "samples" counts packed samples. Without --packer: a JSON array of the 1d
                    object and the 2d object. Skipped samples are reported on stderr.
  --help            this text

presets: )";

struct options {
  std::string preset = "vlm-pretrain";
  std::int64_t samples = 100'000;
  std::uint64_t seed = 1;
  std::string csv;
  std::string packer; // "", "1d" or "2d"
  std::int64_t capacity = 8192;
  std::optional<std::int64_t> budget;
  std::int64_t buffer = 1000;
  std::int64_t lookahead = 16;
  packswap::oversize_policy oversize = packswap::oversize_policy::skip;
  bool json = false;
  bool help = false;
};

options parse(int argc, char** argv) {
  const packswap::cli::options cl(argc, argv,
                                  {"preset", "samples", "seed", "csv", "packer", "capacity",
                                   "budget", "buffer", "lookahead", "oversize"},
                                  {"json", "help"});
  constexpr std::int64_t any_lo = INT64_MIN;
  constexpr std::int64_t any_hi = INT64_MAX;
  options o;
  o.help = cl.flag("help");
  o.json = cl.flag("json");
  o.preset = cl.text("preset", o.preset);
  o.samples = cl.integer("samples", o.samples, any_lo, any_hi); // the generator validates it
  o.seed = static_cast<std::uint64_t>(cl.integer("seed", 1, 0, any_hi));
  o.csv = cl.text("csv", "");
  o.packer = cl.text("packer", "");
  if (!o.packer.empty() && o.packer != "1d" && o.packer != "2d") {
    throw packswap::cli::usage_error("--packer must be 1d or 2d, got '" + o.packer + "'");
  }
  // Capacity, budget, buffer and lookahead are checked by the packers, with their messages.
  o.capacity = cl.integer("capacity", o.capacity, any_lo, any_hi);
  if (cl.has("budget")) {
    o.budget = cl.integer("budget", 0, any_lo, any_hi);
  }
  o.buffer = cl.integer("buffer", o.buffer, any_lo, any_hi);
  o.lookahead = cl.integer("lookahead", o.lookahead, any_lo, any_hi);
  const auto oversize = cl.text("oversize", "skip");
  if (oversize != "skip" && oversize != "reject") {
    throw packswap::cli::usage_error("--oversize must be skip or reject, got '" + oversize + "'");
  }
  o.oversize =
      oversize == "skip" ? packswap::oversize_policy::skip : packswap::oversize_policy::reject;
  if (!o.csv.empty() && (cl.has("preset") || cl.has("samples") || cl.has("seed"))) {
    throw packswap::cli::usage_error(
        "--csv reads its samples from the file: it takes no --preset, --samples or --seed");
  }
  if (o.budget && o.packer == "1d") {
    throw packswap::cli::usage_error("--budget applies to the 2d packer only");
  }
  return o;
}

std::string thousands(std::int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) {
      out += ',';
    }
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string json_of(const char* packer, const packswap::packing_metrics& m) {
  const auto& d = m.image_tokens_per_pack;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                R"({"packer":"%s", "samples":%lld, "packs":%lld, "efficiency":%.6f, )"
                R"("image_tokens_per_pack":{"min":%lld, "median":%lld, "p90":%lld, "p99":%lld, )"
                R"("max":%lld}})",
                packer, static_cast<long long>(m.samples), static_cast<long long>(m.packs),
                m.efficiency(), static_cast<long long>(d.min), static_cast<long long>(d.median),
                static_cast<long long>(d.p90), static_cast<long long>(d.p99),
                static_cast<long long>(d.max));
  return buf;
}

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100.0 * fraction);
  return buf;
}

std::string ratio(double a, double b) {
  if (b == 0.0) {
    return "-";
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", a / b);
  return buf;
}

// The straggler ratio of a ViT whose cost is linear in image tokens: the heaviest pack over the
// mean one.
std::string max_over_mean(const packswap::packing_metrics& m) {
  return ratio(static_cast<double>(m.image_tokens_per_pack.max) * static_cast<double>(m.packs),
               static_cast<double>(m.image_tokens));
}

struct column {
  std::string title;
  packswap::packing_metrics m;
};

void print_table(const std::vector<column>& cols) {
  const auto row = [&](const char* label, auto cell) {
    std::printf("  %-24s", label);
    for (const auto& c : cols) {
      std::printf("%18s", cell(c.m).c_str());
    }
    std::printf("\n");
  };
  std::printf("  %-24s", "");
  for (const auto& c : cols) {
    std::printf("%18s", c.title.c_str());
  }
  std::printf("\n");
  row("packs", [](const auto& m) { return thousands(m.packs); });
  row("efficiency", [](const auto& m) { return percent(m.efficiency()); });
  row("samples packed", [](const auto& m) { return thousands(m.samples); });
  row("samples skipped", [](const auto& m) { return thousands(m.skipped); });
  std::printf("  image tokens per pack\n");
  row("  min", [](const auto& m) { return thousands(m.image_tokens_per_pack.min); });
  row("  median", [](const auto& m) { return thousands(m.image_tokens_per_pack.median); });
  row("  p90", [](const auto& m) { return thousands(m.image_tokens_per_pack.p90); });
  row("  p99", [](const auto& m) { return thousands(m.image_tokens_per_pack.p99); });
  row("  max", [](const auto& m) { return thousands(m.image_tokens_per_pack.max); });
  row("  mean",
      [](const auto& m) { return thousands(m.packs == 0 ? 0 : m.image_tokens / m.packs); });
  row("  max / mean", [](const auto& m) { return max_over_mean(m); });
}

int run(const options& o) {
  packswap::sample_set set;
  std::string source;
  if (!o.csv.empty()) {
    std::ifstream file(o.csv);
    if (!file) {
      std::fprintf(stderr, "packswap-pack: cannot open '%s': %s\n", o.csv.c_str(),
                   std::strerror(errno));
      return 1;
    }
    set = packswap::read_sample_csv(file);
    source = o.csv;
  } else {
    set = packswap::generate(packswap::workload_preset(o.preset), o.samples, o.seed);
    source = "preset " + o.preset + " (seed " + std::to_string(o.seed) + ")";
  }

  const packswap::greedy_packer one_d{o.capacity, o.buffer, o.oversize, o.lookahead};
  std::optional<packswap::pack_list> packs_1d;
  if (o.packer != "2d" || !o.budget) {
    packs_1d = one_d(set);
  }
  const std::int64_t budget =
      o.budget ? *o.budget : packswap::mean_image_tokens_per_pack(*packs_1d);
  const auto two_d_with = [&](std::int64_t b) {
    return packswap::budgeted_packer{o.capacity, b, o.buffer, o.oversize, o.lookahead}(set);
  };
  std::vector<column> cols;
  if (o.packer != "2d") {
    cols.push_back({"1D greedy", packswap::measure_packing(*packs_1d)});
  }
  if (o.packer != "1d") {
    cols.push_back({"2D budgeted", packswap::measure_packing(two_d_with(budget))});
  }

  if (o.json) {
    const bool both = cols.size() == 2;
    std::string out = both ? "[" : "";
    for (std::size_t i = 0; i < cols.size(); ++i) {
      const bool is_1d = cols[i].title[0] == '1';
      out += (i > 0 ? "," : "") + json_of(is_1d ? "1d" : "2d", cols[i].m);
      if (cols[i].m.skipped > 0) {
        std::fprintf(stderr, "packswap-pack: the %s packer skipped %lld samples that fit no pack\n",
                     is_1d ? "1d" : "2d", static_cast<long long>(cols[i].m.skipped));
      }
    }
    std::printf("%s%s\n", out.c_str(), both ? "]" : "");
    return 0;
  }

  std::printf("packswap-pack: %s samples from %s\n",
              thousands(static_cast<std::int64_t>(set.size())).c_str(), source.c_str());
  std::printf("  %s tokens, %s of them image tokens; capacity %s, buffer %s, lookahead %s\n",
              thousands(set.total_tokens()).c_str(),
              percent(set.total_tokens() == 0 ? 0.0
                                              : static_cast<double>(set.total_image_tokens()) /
                                                    static_cast<double>(set.total_tokens()))
                  .c_str(),
              thousands(o.capacity).c_str(), thousands(o.buffer).c_str(),
              thousands(o.lookahead).c_str());
  if (o.packer != "1d") {
    std::printf("  2D image budget %s tokens per pack%s\n", thousands(budget).c_str(),
                o.budget ? "" : " (the mean image tokens per pack of the 1D packing)");
  }
  std::printf("\n");
  print_table(cols);
  if (cols.size() == 2) {
    const auto& a = cols[0].m;
    const auto& b = cols[1].m;
    std::printf("\n2D caps the image tokens per pack at the budget (max %s -> %s, max/mean %s -> "
                "%s) but needs %s more packs: efficiency %s -> %s.\n",
                thousands(a.image_tokens_per_pack.max).c_str(),
                thousands(b.image_tokens_per_pack.max).c_str(), max_over_mean(a).c_str(),
                max_over_mean(b).c_str(),
                percent(a.packs == 0
                            ? 0.0
                            : static_cast<double>(b.packs - a.packs) / static_cast<double>(a.packs))
                    .c_str(),
                percent(a.efficiency()).c_str(), percent(b.efficiency()).c_str());
    std::printf("\nThe 2D budget is a dial between balanced but empty and full but unbalanced:\n");
    std::printf("  %-24s%18s%18s%18s\n", "budget (x mean)", "efficiency", "p99 img/pack",
                "max/mean");
    for (const int pct : {50, 75, 90, 100, 110, 125}) {
      const std::int64_t b2 = budget * pct / 100;
      const auto m = packswap::measure_packing(two_d_with(b2));
      const std::string label = thousands(b2) + " (" + ratio(pct, 100.0) + ")";
      const std::string skipped = m.skipped > 0 ? " (" + thousands(m.skipped) + " skipped)" : "";
      std::printf("  %-24s%18s%18s%18s%s\n", label.c_str(), percent(m.efficiency()).c_str(),
                  thousands(m.image_tokens_per_pack.p99).c_str(), max_over_mean(m).c_str(),
                  skipped.c_str());
    }
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  options o;
  try {
    o = parse(argc, argv);
  } catch (const packswap::cli::usage_error& e) {
    std::fprintf(stderr, "packswap-pack: %s (see --help)\n", e.what());
    return 2;
  }
  if (o.help) {
    std::string names;
    for (const auto& n : packswap::workload_preset_names()) {
      names += (names.empty() ? "" : ", ") + n + (names.empty() ? " (default)" : "");
    }
    std::printf("%s%s\n", usage, names.c_str());
    return 0;
  }
  try {
    return run(o);
  } catch (const packswap::error& e) {
    std::fprintf(stderr, "packswap-pack: %s\n", e.what());
    return 1;
  }
}
