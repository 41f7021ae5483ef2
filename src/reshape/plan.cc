// The plan of parts (plan.h): contiguous cuts of the inputs laid end to end.
#include "tfrecordfs/reshape/plan.h"

#include <algorithm>

#include "absl/numeric/int128.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tfrecordfs/base/hash.h"

namespace tfrecordfs::reshape {
namespace {

bool AllDigits(absl::string_view s) {
  return !s.empty() && s.size() <= 9 && std::all_of(s.begin(), s.end(), absl::ascii_isdigit);
}

// The cut points floor(k * total / parts), k = 1 .. parts - 1.
std::vector<uint64_t> Cuts(uint64_t total, uint32_t parts) {
  std::vector<uint64_t> cuts;
  for (uint32_t k = 1; k < parts; ++k) {
    cuts.push_back(absl::Uint128Low64(absl::uint128(total) * k / parts));
  }
  return cuts;
}

// The part owning byte `x` of the whole: the number of cut points at or
// before it.
uint32_t PartOf(const std::vector<uint64_t>& cuts, uint64_t x) {
  return static_cast<uint32_t>(std::upper_bound(cuts.begin(), cuts.end(), x) - cuts.begin());
}

}  // namespace

absl::StatusOr<PartSpec> ParsePartSpec(absl::string_view text) {
  const size_t slash = text.find('/');
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--part needs K/N, part K of N (0 <= K < N <= ", kMaxParts, "), not '", text,
                     "'", why.empty() ? "" : ": ", why));
  };
  if (slash == absl::string_view::npos) return bad("no '/'");
  const absl::string_view k = text.substr(0, slash), n = text.substr(slash + 1);
  if (!AllDigits(k) || !AllDigits(n)) return bad("K and N are decimal numbers");
  uint32_t index = 0, count = 0;
  if (!absl::SimpleAtoi(k, &index) || !absl::SimpleAtoi(n, &count)) return bad("");
  if (count == 0) return bad("N must be at least 1");
  if (count > kMaxParts) return bad(absl::StrCat("N must be at most ", kMaxParts));
  if (index >= count) return bad("K counts from 0 and must be below N");
  return PartSpec{index, count};
}

std::string PartPlan::IdHex() const { return absl::StrFormat("%016x", id); }

PartPlan PlanParts(const std::vector<PlanFile>& files, uint32_t parts, absl::string_view salt) {
  parts = std::max<uint32_t>(parts, 1);
  PartPlan plan;
  plan.parts = parts;
  plan.pieces.resize(parts);
  // The id: a canonical text of everything below, hashed.
  uint64_t h = Fnv1a64(absl::StrCat("tfrecordfs plan v1\n", salt, "\nparts ", parts, "\n"));
  uint64_t total = 0;
  for (const PlanFile& f : files) {
    h = Fnv1a64(absl::StrCat(f.path.size(), ":", f.path, " ", f.size, f.splittable ? " s\n" : "\n"),
                h);
    total += f.size;
  }
  plan.id = h;
  const std::vector<uint64_t> cuts = Cuts(total, parts);
  uint64_t start = 0;  // of the file in the whole
  for (size_t i = 0; i < files.size(); ++i) {
    const PlanFile& f = files[i];
    if (total == 0) {
      plan.pieces[0].push_back({i, 0, f.size, true});
      continue;
    }
    if (!f.splittable || f.size == 0) {
      plan.pieces[PartOf(cuts, start + f.size / 2)].push_back({i, 0, f.size, true});
    } else {
      // Cut at every cut point strictly inside the file.
      std::vector<uint64_t> at = {0};
      for (auto c = std::upper_bound(cuts.begin(), cuts.end(), start);
           c != cuts.end() && *c < start + f.size; ++c) {
        if (*c - start != at.back()) at.push_back(*c - start);
      }
      at.push_back(f.size);
      const bool whole = at.size() == 2;
      for (size_t p = 0; p + 1 < at.size(); ++p) {
        plan.pieces[PartOf(cuts, start + at[p])].push_back({i, at[p], at[p + 1], whole});
      }
    }
    start += f.size;
  }
  return plan;
}

std::pair<uint64_t, uint64_t> PieceRecords(const index::ShardIndex& idx, const Piece& piece) {
  const uint64_t n = idx.num_records();
  if (piece.whole) return {0, n};
  if (idx.codec() != source::Codec::kNone || idx.checkpoints() != nullptr) {
    return piece.begin == 0 ? std::pair<uint64_t, uint64_t>{0, n}
                            : std::pair<uint64_t, uint64_t>{n, n};
  }
  // The first record beginning at or after `at` (records begin in order).
  const auto first_at = [&](uint64_t at) {
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo) / 2;
      if (idx.begin(mid) < at) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  };
  return {first_at(piece.begin), first_at(piece.end)};
}

std::vector<size_t> SplitByWeight(const std::vector<uint64_t>& weights, uint32_t parts) {
  parts = std::max<uint32_t>(parts, 1);
  uint64_t total = 0;
  for (uint64_t w : weights) total += w;
  const std::vector<uint64_t> cuts = Cuts(total, parts);
  std::vector<size_t> out(parts + 1, weights.size());
  out[0] = 0;
  // out[k] = the first item of run k or later; filled from the back so that
  // empty runs take the next run's start.
  uint64_t start = 0;
  std::vector<uint32_t> owner(weights.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    owner[i] = total == 0 ? 0 : PartOf(cuts, start + weights[i] / 2);
    start += weights[i];
  }
  for (uint32_t k = 1; k < parts; ++k) {
    out[k] = std::lower_bound(owner.begin(), owner.end(), k) - owner.begin();
  }
  return out;
}

}  // namespace tfrecordfs::reshape
