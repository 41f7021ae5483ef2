// What a command run as parts (`--part K/N`, plan.h) leaves in its output
// directory DIR, and the `--finalize` step that turns the parts' outputs
// into the result.
//
// Layout (local directories):
//
//   DIR/.tfrecordfs-parts/
//     <plan>-part-<K>/                 part K, published: its output files at
//       manifest.json                  their paths relative to DIR, and its
//       <outputs...>                   manifest (written last, then the
//                                      folder renamed into place)
//     <plan>-part-<K>.work-<pid>-<n>/  part K being written; a `.lock` file in
//                                      it is flock()ed while the part runs
//     <plan>-map-<K>/                  a shuffle's first pass (shuffle.h): part
//                                      K's runs, read by every part's second
//                                      pass, removed by --finalize
//
// <plan> is PartPlan::IdHex(). A part writes into a work folder of its own
// and publishes it with one rename (an earlier run's folder, a retried pod's,
// is swapped out atomically with renameat2(RENAME_EXCHANGE) and then
// removed): nothing half-written is ever under a part's published name, and
// re-running part K replaces only part K's outputs. Two runs of the same
// part at once each write their own work folder; both publish the same
// bytes (the work is a function of the plan), the last rename wins. A run
// killed midway (SIGKILL) leaves its work folder, unlocked: the next run of
// the same part, and --finalize, remove it.
//
// The manifest (JSON) says what the part is and did:
//   {"version": 1, "command": "reshard", "plan": "<id>", "part": K,
//    "parts": N, "inputs": [{"path": ..., "size": B, "mtime_ns": T}
//    | {"path": URL, "size": B, "etag_fingerprint": F}],
//    "outputs": [{"path": <relative to DIR>, "records": R, "bytes": B,
//    "file_bytes": F, "crc32c": C}]}
// ("bytes": framed uncompressed bytes, "crc32c": of the file's bytes,
// unmasked.)
//
// Thread-safety: the functions keep no state; PartOutput is used by one
// thread.
#ifndef TFRECORDFS_RESHAPE_PARTS_H_
#define TFRECORDFS_RESHAPE_PARTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/reshape/plan.h"

namespace tfrecordfs::reshape {

// The folder under DIR holding the parts.
inline constexpr char kPartsDirName[] = ".tfrecordfs-parts";

struct ManifestInput {
  std::string path;
  uint64_t size = 0;
  int64_t mtime_ns = 0;          // a local file's
  int64_t etag_fingerprint = 0;  // an object's (scan::SourceEntry's st_ctim)
  bool object = false;
};

struct ManifestOutput {
  std::string path;  // relative to DIR
  uint64_t records = 0, bytes = 0, file_bytes = 0;
  uint32_t crc32c = 0;
  // file_bytes and crc32c were computed as the file was written: Publish
  // checks the size only, without reading the file back. Not in the JSON.
  bool crc_known = false;
};

struct PartManifest {
  std::string command;  // "reshard", "repair"
  std::string plan;     // PartPlan::IdHex()
  uint32_t part = 0, parts = 1;
  std::vector<ManifestInput> inputs;
  std::vector<ManifestOutput> outputs;
};

// The manifest of part `part` of `plan` of `command` before its outputs
// are added: its inputs are the files of `listing` (the plan's inputs, in
// order) for which `read` is true (the files the part read).
PartManifest NewPartManifest(absl::string_view command, const PartPlan& plan, PartSpec part,
                             const std::vector<ManifestInput>& listing,
                             const std::function<bool(const std::string& path)>& read);

// The pieces of the file at `path` (one of `listing`, the files `plan` was
// made of, in order) that part `part` owns: none when another part owns it.
std::vector<Piece> PiecesOf(const PartPlan& plan, uint32_t part,
                            const std::vector<ManifestInput>& listing, const std::string& path);

std::string ManifestJson(const PartManifest& m);
// InvalidArgument naming `where` when `text` is not such a manifest.
absl::StatusOr<PartManifest> ParseManifest(const std::string& text, const std::string& where);

// Part K's folder being written (see the layout above).
class PartOutput {
 public:
  // Creates DIR/.tfrecordfs-parts/<plan>-part-<K>.work-<pid>-<n> (and its
  // parents) and locks it, after removing the work folders of the same
  // part that no running process holds (a killed run's). Errors: I/O.
  // `phase`: "part" (outputs --finalize moves) or "map" (a shuffle's
  // first pass: intermediates).
  static absl::StatusOr<std::unique_ptr<PartOutput>> Begin(const std::string& dir,
                                                           const std::string& plan, uint32_t part,
                                                           const std::string& phase = "part");
  // Removes the work folder unless it was published.
  ~PartOutput();
  PartOutput(const PartOutput&) = delete;
  PartOutput& operator=(const PartOutput&) = delete;

  // Where the part writes its outputs (paths relative to DIR go below it).
  const std::string& work_dir() const { return work_; }
  // Where the outputs are once published (DIR/.tfrecordfs-parts/<plan>-part-<K>).
  const std::string& published_dir() const { return published_; }

  // Fills in each output's crc32c and file_bytes (reading the file back),
  // writes manifest.json durably, fsyncs the folder and publishes it as the
  // part's (replacing an earlier run's atomically), then fsyncs the parts
  // folder. The outputs must be durable already (fsynced, and the folders
  // of those below work_dir() fsynced, by their writer). Errors: I/O, an
  // output that is missing.
  absl::Status Publish(PartManifest manifest);

 private:
  PartOutput(std::string root, std::string work, std::string published, int lock_fd);
  std::string root_, work_, published_;
  int lock_fd_ = -1;
  bool published_done_ = false;
};

struct FinalizeReport {
  std::string plan;
  uint32_t parts = 0;
  std::vector<ManifestOutput> outputs;  // by part, then in each part's order
  std::vector<std::string> removed;     // stale work folders removed
};

// Finalizes DIR: finds the published parts of `command`, takes N from their
// manifests and checks, against `plan_for(N)` (the id of the plan the
// current inputs give for N parts) and `current` (the current inputs), that
// every part 0..N-1 is there, that no part's inputs changed (size, mtime
// or ETag), that no other plan's part (foreign) and no running part is
// there; then moves every output to its final name (never over an existing
// file; a finalize interrupted midway may be run again), fsyncs, and
// removes DIR/.tfrecordfs-parts. FailedPrecondition listing every missing,
// stale, foreign or running part (and which input changed) otherwise,
// with nothing moved. Errors: I/O, AlreadyExists for an output whose final
// name is taken.
// DIR/.tfrecordfs-parts/<plan>-<phase>-<K>: a published part's folder.
std::string PublishedPartDir(const std::string& dir, const std::string& plan, uint32_t part,
                             const std::string& phase = "part");
// Reads the manifest of a published part's folder.
absl::StatusOr<PartManifest> ReadManifest(const std::string& part_dir);

absl::StatusOr<FinalizeReport> FinalizeParts(
    const std::string& dir, const std::string& command,
    const std::function<std::string(uint32_t parts)>& plan_for,
    const std::vector<ManifestInput>& current);

// What --finalize found among the parts (a local DIR's folders, or a
// bucket's key groups, bucket_parts.h), before judging it.
struct FoundPart {
  std::string name;                      // "<plan>-part-<K>", "<plan>-map-<K>", or anything else
  std::optional<PartManifest> manifest;  // a part's, when readable
  std::string problem;                   // why not
  bool running = false;                  // a work folder being written
};
// The parts to finalize: the plan whose parts are all there and current.
struct CheckedParts {
  std::string plan;
  uint32_t parts = 0;
  std::vector<PartManifest> manifests;  // by part
};
// FinalizeParts's judgement (above) of `found` (in name order) in `root`
// (for messages), shared by the local and the bucket --finalize:
// FailedPrecondition naming `dir` and listing every missing, stale,
// foreign or running part.
absl::StatusOr<CheckedParts> CheckParts(const std::string& dir, const std::string& root,
                                        const std::vector<FoundPart>& found,
                                        const std::string& command,
                                        const std::function<std::string(uint32_t parts)>& plan_for,
                                        const std::vector<ManifestInput>& current);

}  // namespace tfrecordfs::reshape

#endif  // TFRECORDFS_RESHAPE_PARTS_H_
