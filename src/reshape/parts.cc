// Parts' folders, manifests and --finalize (parts.h).
#include "tfrecordfs/reshape/parts.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"

namespace tfrecordfs::reshape {
namespace {

constexpr char kManifestName[] = "manifest.json";
constexpr char kLockName[] = ".lock";

std::string PublishedName(const std::string& plan, uint32_t part,
                          const std::string& phase = "part") {
  return absl::StrCat(plan, "-", phase, "-", part);
}

// "<16 hex>-<phase>-<K>" -> (plan, K); ".work-" suffixes are not published.
bool ParsePublished(absl::string_view name, absl::string_view phase, std::string* plan,
                    uint32_t* part) {
  const std::string mid = absl::StrCat("-", phase, "-");
  if (name.size() < 16 + mid.size() + 1 || name.substr(16, mid.size()) != mid) return false;
  const absl::string_view id = name.substr(0, 16), k = name.substr(16 + mid.size());
  if (!std::all_of(id.begin(), id.end(), absl::ascii_isxdigit) || k.empty() ||
      !std::all_of(k.begin(), k.end(), absl::ascii_isdigit) || !absl::SimpleAtoi(k, part)) {
    return false;
  }
  *plan = std::string(id);
  return true;
}

// Whether a work folder's run is alive: its `.lock` is held (kHeld), free
// (kFree: the run was killed), or missing (kFree as well: a run creates it
// right after the folder, so only a run killed in between leaves none).
enum class LockState { kHeld, kFree };
LockState WorkLock(const std::string& dir) {
  const int fd = ::open(JoinPath(dir, kLockName).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return LockState::kFree;
  const bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
  ::close(fd);
  return held ? LockState::kHeld : LockState::kFree;
}

absl::StatusOr<uint32_t> FileCrc(const std::string& path, uint64_t* size) {
  auto fd = OpenFile(path, O_RDONLY | O_CLOEXEC);
  if (!fd.ok()) return fd.status();
  std::string buf(1 << 20, '\0');
  uint32_t crc = 0;
  uint64_t at = 0;
  for (;;) {
    auto n = PreadUpTo(fd->get(), buf.data(), buf.size(), at, path);
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    crc = crc32c::Extend(crc, buf.data(), *n);
    at += *n;
  }
  *size = at;
  return crc;
}

}  // namespace

PartManifest NewPartManifest(absl::string_view command, const PartPlan& plan, PartSpec part,
                             const std::vector<ManifestInput>& listing,
                             const std::function<bool(const std::string& path)>& read) {
  PartManifest m;
  m.command = std::string(command);
  m.plan = plan.IdHex();
  m.part = part.index;
  m.parts = part.count;
  for (const ManifestInput& f : listing) {
    if (read(f.path)) m.inputs.push_back(f);
  }
  return m;
}

std::vector<Piece> PiecesOf(const PartPlan& plan, uint32_t part,
                            const std::vector<ManifestInput>& listing, const std::string& path) {
  // A part's pieces are few (its own files, and a cut one at each end).
  std::vector<Piece> out;
  if (part >= plan.pieces.size()) return out;
  for (const Piece& p : plan.pieces[part]) {
    if (p.file < listing.size() && listing[p.file].path == path) out.push_back(p);
  }
  return out;
}

std::string ManifestJson(const PartManifest& m) {
  nlohmann::ordered_json j;
  j["version"] = 1;
  j["command"] = m.command;
  j["plan"] = m.plan;
  j["part"] = m.part;
  j["parts"] = m.parts;
  j["inputs"] = nlohmann::ordered_json::array();
  for (const ManifestInput& in : m.inputs) {
    nlohmann::ordered_json e;
    e["path"] = in.path;
    e["size"] = in.size;
    if (in.object) {
      e["etag_fingerprint"] = in.etag_fingerprint;
    } else {
      e["mtime_ns"] = in.mtime_ns;
    }
    j["inputs"].push_back(std::move(e));
  }
  j["outputs"] = nlohmann::ordered_json::array();
  for (const ManifestOutput& out : m.outputs) {
    j["outputs"].push_back({{"path", out.path},
                            {"records", out.records},
                            {"bytes", out.bytes},
                            {"file_bytes", out.file_bytes},
                            {"crc32c", out.crc32c}});
  }
  return j.dump(1) + "\n";
}

absl::StatusOr<PartManifest> ParseManifest(const std::string& text, const std::string& where) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (j.at("version").get<int>() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": manifest version ", j.at("version").dump(), " is not 1"));
    }
    PartManifest m;
    m.command = j.at("command").get<std::string>();
    m.plan = j.at("plan").get<std::string>();
    m.part = j.at("part").get<uint32_t>();
    m.parts = j.at("parts").get<uint32_t>();
    for (const auto& e : j.at("inputs")) {
      ManifestInput in;
      in.path = e.at("path").get<std::string>();
      in.size = e.at("size").get<uint64_t>();
      in.object = e.contains("etag_fingerprint");
      if (in.object) {
        in.etag_fingerprint = e.at("etag_fingerprint").get<int64_t>();
      } else {
        in.mtime_ns = e.at("mtime_ns").get<int64_t>();
      }
      m.inputs.push_back(std::move(in));
    }
    for (const auto& e : j.at("outputs")) {
      ManifestOutput out;
      out.path = e.at("path").get<std::string>();
      out.records = e.at("records").get<uint64_t>();
      out.bytes = e.at("bytes").get<uint64_t>();
      out.file_bytes = e.at("file_bytes").get<uint64_t>();
      out.crc32c = e.at("crc32c").get<uint32_t>();
      // Outputs go below DIR, nowhere else.
      if (out.path.empty() || out.path[0] == '/' || absl::StrContains(out.path, "..")) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": output path '", out.path, "' is not below the directory"));
      }
      m.outputs.push_back(std::move(out));
    }
    return m;
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": not a part manifest: ", e.what()));
  }
}

PartOutput::PartOutput(std::string root, std::string work, std::string published, int lock_fd)
    : root_(std::move(root)),
      work_(std::move(work)),
      published_(std::move(published)),
      lock_fd_(lock_fd) {}

std::string PublishedPartDir(const std::string& dir, const std::string& plan, uint32_t part,
                             const std::string& phase) {
  return JoinPath(JoinPath(dir, kPartsDirName), PublishedName(plan, part, phase));
}

absl::StatusOr<PartManifest> ReadManifest(const std::string& part_dir) {
  const std::string path = JoinPath(part_dir, kManifestName);
  auto text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  return ParseManifest(*text, path);
}

absl::StatusOr<std::unique_ptr<PartOutput>> PartOutput::Begin(const std::string& dir,
                                                              const std::string& plan,
                                                              uint32_t part,
                                                              const std::string& phase) {
  const std::string root = JoinPath(dir, kPartsDirName);
  if (auto s = MakeDirs(root, 0755); !s.ok()) return s;
  const std::string published = JoinPath(root, PublishedName(plan, part, phase));
  // A killed run's work folders of this part: no process holds their lock.
  auto names = ListNames(root);
  if (!names.ok()) return names.status();
  const std::string work_prefix = PublishedName(plan, part, phase) + ".work-";
  for (const std::string& name : *names) {
    if (!absl::StartsWith(name, work_prefix)) continue;
    const std::string path = JoinPath(root, name);
    // Held: another run of this part is writing; leave it.
    if (WorkLock(path) == LockState::kFree) (void)RemoveTree(path);
  }
  static std::atomic<int> serial{0};
  const std::string work = absl::StrCat(published, ".work-", ::getpid(), "-", serial.fetch_add(1));
  if (::mkdir(work.c_str(), 0755) != 0) return ErrnoError(errno, work);
  const std::string lock = JoinPath(work, kLockName);
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    (void)RemoveTree(work);
    return ErrnoError(err, lock);
  }
  (void)::flock(fd, LOCK_EX);  // our own new file: nobody else holds it
  return std::unique_ptr<PartOutput>(new PartOutput(root, work, published, fd));
}

PartOutput::~PartOutput() {
  if (!published_done_) (void)RemoveTree(work_);
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

absl::Status PartOutput::Publish(PartManifest manifest) {
  for (ManifestOutput& out : manifest.outputs) {
    if (out.crc_known) {
      struct stat st;
      const std::string path = JoinPath(work_, out.path);
      if (::stat(path.c_str(), &st) != 0) return ErrnoError(errno, path);
      if (static_cast<uint64_t>(st.st_size) != out.file_bytes) {
        return absl::DataLossError(
            absl::StrCat(path, ": ", st.st_size, " bytes, not the ", out.file_bytes, " written"));
      }
      continue;
    }
    auto crc = FileCrc(JoinPath(work_, out.path), &out.file_bytes);
    if (!crc.ok()) return crc.status();
    out.crc32c = *crc;
  }
  // The work folder is nobody's until the rename below: the manifest is
  // written in place (no temporary name, no rename of its own) and
  // fsynced, then the folder once (its entries: the manifest and the
  // outputs' renames), so that the folder is durable and complete before
  // it is published. (A temporary name and its rename cost two more
  // journal commits, about 7 ms each on ext4, in every part.)
  {
    const std::string path = JoinPath(work_, kManifestName);
    auto fd = OpenFile(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (!fd.ok()) return fd.status();
    const std::string json = ManifestJson(manifest);
    if (auto s = WriteFull(fd->get(), json.data(), json.size(), path); !s.ok()) return s;
    if (::fsync(fd->get()) != 0) return ErrnoError(errno, path);
  }
  if (auto s = FsyncDir(work_); !s.ok()) return s;
  // Into place: a first run renames; a re-run swaps with the earlier run's
  // folder (atomically) and removes that.
  if (::renameat2(AT_FDCWD, work_.c_str(), AT_FDCWD, published_.c_str(), RENAME_NOREPLACE) != 0) {
    if (errno != EEXIST && errno != ENOTEMPTY) return ErrnoError(errno, published_);
    if (::renameat2(AT_FDCWD, work_.c_str(), AT_FDCWD, published_.c_str(), RENAME_EXCHANGE) != 0) {
      return ErrnoError(errno, absl::StrCat("cannot swap ", work_, " into ", published_));
    }
    published_done_ = true;
    (void)RemoveTree(work_);  // now the earlier run's folder
  }
  published_done_ = true;
  return FsyncDir(root_);
}

absl::StatusOr<CheckedParts> CheckParts(const std::string& dir, const std::string& root,
                                        const std::vector<FoundPart>& entries,
                                        const std::string& command,
                                        const std::function<std::string(uint32_t parts)>& plan_for,
                                        const std::vector<ManifestInput>& current) {
  struct Found {
    std::string name, plan;
    uint32_t part = 0;
    std::optional<PartManifest> manifest;
    std::string problem;  // unreadable manifest
  };
  std::vector<Found> found;
  std::vector<std::string> running;
  std::vector<std::pair<std::string, std::string>> maps;  // (name, plan)
  for (const FoundPart& e : entries) {
    if (e.running) {
      running.push_back(e.name);
      continue;
    }
    Found f;
    f.name = e.name;
    if (std::string map_plan; ParsePublished(e.name, "map", &map_plan, &f.part)) {
      maps.emplace_back(e.name, map_plan);  // a shuffle's first pass: judged below
      continue;
    }
    if (!ParsePublished(e.name, "part", &f.plan, &f.part)) {
      f.problem = "not a part's folder";
    } else if (!e.manifest) {
      f.problem = e.problem.empty() ? "no manifest" : e.problem;
    } else {
      f.manifest = e.manifest;
    }
    found.push_back(std::move(f));
  }

  // N: the parts count whose plan (for the current inputs) the manifests name.
  std::set<uint32_t> counts;
  for (const Found& f : found) {
    if (f.manifest && f.manifest->command == command) counts.insert(f.manifest->parts);
  }
  std::optional<uint32_t> n;
  std::string plan;
  for (uint32_t c : counts) {
    const std::string id = plan_for(c);
    const bool any = std::any_of(found.begin(), found.end(), [&](const Found& f) {
      return f.manifest && f.manifest->command == command && f.manifest->parts == c &&
             f.manifest->plan == id;
    });
    if (any && !n) {
      n = c;
      plan = id;
    } else if (any) {
      return absl::FailedPreconditionError(absl::StrCat(
          dir, ": parts of two plans for the current inputs (", *n, " and ", c,
          " parts) are there; remove the one not wanted from ", root, "; nothing finalized"));
    }
  }

  std::map<std::string, const ManifestInput*> now;
  for (const ManifestInput& in : current) now[in.path] = &in;
  // What changed among `inputs` since they were read.
  const auto changes = [&](const std::vector<ManifestInput>& inputs) {
    std::vector<std::string> out;
    for (const ManifestInput& in : inputs) {
      auto it = now.find(in.path);
      if (it == now.end()) {
        out.push_back(absl::StrCat(in.path, " is gone"));
      } else if (it->second->size != in.size) {
        out.push_back(
            absl::StrCat(in.path, " changed size (", in.size, " -> ", it->second->size, " bytes)"));
      } else if (in.object != it->second->object ||
                 (in.object ? it->second->etag_fingerprint != in.etag_fingerprint
                            : it->second->mtime_ns != in.mtime_ns)) {
        out.push_back(absl::StrCat(in.path, in.object ? " has another ETag" : " was modified",
                                   " since the part read it"));
      }
    }
    return out;
  };

  std::vector<std::string> problems;
  std::vector<const PartManifest*> parts;
  if (n) parts.assign(*n, nullptr);
  for (const Found& f : found) {
    const std::string where = absl::StrCat(root, "/", f.name);
    if (!f.manifest) {
      problems.push_back(absl::StrCat("foreign: ", where, ": ", f.problem));
      continue;
    }
    const PartManifest& m = *f.manifest;
    if (!n || m.command != command || m.parts != *n || m.plan != plan || m.part >= *n ||
        f.plan != m.plan || f.part != m.part) {
      std::string why = m.command != command
                            ? absl::StrCat("a part of `", m.command, "`, not `", command, "`")
                            : absl::StrCat("part ", m.part, "/", m.parts, " of plan ", m.plan,
                                           ", not of the plan the current inputs give");
      const std::vector<std::string> changed = changes(m.inputs);
      if (!changed.empty()) absl::StrAppend(&why, ": ", absl::StrJoin(changed, "; "));
      problems.push_back(absl::StrCat("foreign: ", where, ": ", why));
      continue;
    }
    if (const std::vector<std::string> changed = changes(m.inputs); !changed.empty()) {
      problems.push_back(absl::StrCat("stale: part ", m.part, "/", m.parts, " (", where,
                                      "): ", absl::StrJoin(changed, "; ")));
      continue;
    }
    parts[m.part] = &m;
  }
  for (const auto& [name, map_plan] : maps) {
    if (!n || map_plan != plan) {
      problems.push_back(
          absl::StrCat("foreign: ", root, "/", name, ": a shuffle's first pass of another plan"));
    }
  }
  for (const std::string& r : running) {
    problems.push_back(absl::StrCat("running: ", root, "/", r, " is being written"));
  }
  if (n) {
    std::vector<std::string> missing;
    for (uint32_t k = 0; k < *n; ++k) {
      if (parts[k] == nullptr) missing.push_back(absl::StrCat(k));
    }
    if (!missing.empty()) {
      problems.insert(problems.begin(),
                      absl::StrCat("missing: part(s) ", absl::StrJoin(missing, ", "), " of ", *n,
                                   " (plan ", plan, ")"));
    }
  } else {
    problems.insert(problems.begin(),
                    absl::StrCat("missing: no part of `", command,
                                 "` for the current inputs (none of their plans matches)"));
  }
  if (!problems.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, ": cannot finalize; nothing was moved:\n  ", absl::StrJoin(problems, "\n  ")));
  }

  CheckedParts out;
  out.plan = plan;
  out.parts = *n;
  for (const PartManifest* m : parts) out.manifests.push_back(*m);
  return out;
}

absl::StatusOr<FinalizeReport> FinalizeParts(
    const std::string& dir, const std::string& command,
    const std::function<std::string(uint32_t parts)>& plan_for,
    const std::vector<ManifestInput>& current) {
  const std::string root = JoinPath(dir, kPartsDirName);
  auto exists = Exists(root);
  if (!exists.ok()) return exists.status();
  if (!*exists) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, ": no part has run (no ", kPartsDirName, " folder); nothing finalized"));
  }
  auto names = ListNames(root);
  if (!names.ok()) return names.status();
  std::sort(names->begin(), names->end());
  std::vector<FoundPart> found;
  std::vector<std::string> stale_work;
  for (const std::string& name : *names) {
    const std::string path = JoinPath(root, name);
    FoundPart f;
    f.name = name;
    std::string plan;
    uint32_t k = 0;
    if (absl::StrContains(name, ".work-")) {
      if (WorkLock(path) == LockState::kFree) {
        stale_work.push_back(path);
        continue;
      }
      f.running = true;
    } else if (ParsePublished(name, "part", &plan, &k)) {
      const std::string mpath = JoinPath(path, kManifestName);
      auto text = ReadFileToString(mpath);
      if (!text.ok()) {
        f.problem = std::string(text.status().message());
      } else if (auto m = ParseManifest(*text, mpath); !m.ok()) {
        f.problem = std::string(m.status().message());
      } else {
        f.manifest = *std::move(m);
      }
    }
    found.push_back(std::move(f));
  }
  auto checked = CheckParts(dir, root, found, command, plan_for, current);
  if (!checked.ok()) return checked.status();
  const std::string& plan = checked->plan;
  const std::optional<uint32_t> n = checked->parts;
  std::vector<const PartManifest*> parts;
  for (const PartManifest& m : checked->manifests) parts.push_back(&m);

  // Every output: its part's file, or already at its final name (a finalize
  // run again after an interruption). Checked before anything moves.
  FinalizeReport report;
  report.plan = plan;
  report.parts = *n;
  std::set<std::string> names_seen;
  for (uint32_t k = 0; k < *n; ++k) {
    const std::string part_dir = JoinPath(root, PublishedName(plan, k));
    for (const ManifestOutput& out : parts[k]->outputs) {
      if (!names_seen.insert(out.path).second) {
        return absl::FailedPreconditionError(
            absl::StrCat(dir, ": two parts name the output ", out.path, "; nothing moved"));
      }
      auto from = Exists(JoinPath(part_dir, out.path));
      auto to = Exists(JoinPath(dir, out.path));
      if (!from.ok()) return from.status();
      if (!to.ok()) return to.status();
      if (*from && *to) {
        return absl::AlreadyExistsError(absl::StrCat(
            JoinPath(dir, out.path), ": already exists (never replaced); nothing moved"));
      }
      if (!*from && !*to) {
        return absl::FailedPreconditionError(absl::StrCat(
            JoinPath(part_dir, out.path), ": the part's output is missing; nothing moved"));
      }
    }
  }
  std::set<std::string> dirs = {dir};
  for (uint32_t k = 0; k < *n; ++k) {
    const std::string part_dir = JoinPath(root, PublishedName(plan, k));
    for (const ManifestOutput& out : parts[k]->outputs) {
      const std::string from = JoinPath(part_dir, out.path), to = JoinPath(dir, out.path);
      auto here = Exists(from);
      if (!here.ok()) return here.status();
      if (*here) {
        if (auto s = MakeDirs(Dirname(to), 0755); !s.ok()) return s;
        if (auto s = RenameNoReplace(from, to); !s.ok()) return s;
        dirs.insert(Dirname(to));
      }
      report.outputs.push_back(out);
    }
  }
  for (const std::string& d : dirs) {
    if (auto s = FsyncDir(d); !s.ok()) return s;
  }
  for (const std::string& w : stale_work) report.removed.push_back(w);
  if (auto s = RemoveTree(root); !s.ok()) return s;
  if (auto s = FsyncDir(dir); !s.ok()) return s;
  return report;
}

}  // namespace tfrecordfs::reshape
