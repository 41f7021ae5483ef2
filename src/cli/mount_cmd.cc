// The mount: the daemon's life cycle, one step a method of Mount (check and
// prepare, open the staging store, index and serve, pack on unmount). The
// command line is mount_options.h's. See commands.h.
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/cli/commands.h"
#include "src/cli/control.h"
#include "src/cli/mount_options.h"
#include "src/cli/pack_upload.h"
#include "src/cli/progress.h"
#include "src/cli/runtime.h"
#include "tfrecordfs/arrayrecord/writer.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/fuse/session.h"
#include "tfrecordfs/index/index_store.h"
#include "tfrecordfs/objstore/listing.h"
#include "tfrecordfs/repack/bucket_rewrite.h"
#include "tfrecordfs/repack/pack.h"
#include "tfrecordfs/repack/rewrite.h"
#include "tfrecordfs/source/shard_source.h"
#include "tfrecordfs/staging/deletions.h"
#include "tfrecordfs/staging/layout.h"
#include "tfrecordfs/staging/store.h"
#include "tfrecordfs/vfs/filesystem.h"

namespace tfrecordfs::cli {
namespace {

// The SOURCEs as the log names them: no URL's query string (a presigned
// URL's credentials).
std::string RedactedSources(const std::vector<std::string>& sources) {
  std::vector<std::string> out;
  for (const std::string& s : sources) out.push_back(objstore::RedactSource(s));
  return absl::StrJoin(out, " ");
}

// The mount point must be an existing directory that is not already one
// of our mounts (stacking a second daemon on it would hide the first).
// Returns 0, or kExitFailed after saying why: like a missing source, a bad
// mount point is a failed mount, not a malformed command line.
int CheckMountpoint(const std::string& mnt) {
  struct stat st;
  if (::stat(mnt.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOTCONN) {
      log::Error("mount point ", mnt, " is a dead mount (", std::strerror(err),
                 "); run `fusermount3 -u ", mnt, "` first");
      return kExitFailed;
    }
    log::Error("mount point ", mnt, ": ", std::strerror(err));
    return kExitFailed;
  }
  if (!S_ISDIR(st.st_mode)) {
    log::Error("mount point ", mnt, " is not a directory");
    return kExitFailed;
  }
  auto resolved = RealPath(mnt);
  if (!resolved.ok()) {
    log::Error("mount point ", resolved.status().message());
    return kExitFailed;
  }
  const std::string& real = *resolved;
  if (auto m = cli::FindTfrecordfsMount(real)) {  // none also when there is no /proc
    log::Error(real, " is already mounted (tfrecordfs of ", m->source,
               "); unmount it first: tfrecordfs unmount ", real);
    return kExitFailed;
  }
  return 0;
}

// The codec every source shard shares (kNone when they differ or there is
// none): new shards are packed like the data they join (a dataset of
// ArrayRecord files gets an ArrayRecord file: PackArrayRecordOptions).
source::Codec SourcesCodec(const vfs::Filesystem& fs) {
  std::optional<source::Codec> codec;
  for (const auto& shard : fs.shards()) {
    if (codec && *codec != shard.index->codec()) return source::Codec::kNone;
    codec = shard.index->codec();
  }
  return codec.value_or(source::Codec::kNone);
}

// One mount's life, in the order MountMain runs its steps; each step
// returns an exit code when the mount stops there, after saying why.
class Mount {
 public:
  explicit Mount(CliOptions cli) : cli_(std::move(cli)) {}

  // Checks the mount point and the sources before anything is read or
  // created; starts the log file; sets the FUSE options the mount implies.
  std::optional<int> Prepare();
  // The staging store: opened (and locked) first, recovered from any pack a
  // crash interrupted, before anything is served. A read-only mount neither
  // creates, locks nor writes it: it shows what is staged if there is a
  // store, else no staging folder.
  std::optional<int> OpenStore();
  // Indexes the shards, mounts, and serves until unmounted.
  std::optional<int> Serve();
  // Unmounted: packs what was staged, then tells `tfrecordfs unmount`.
  int PackOnUnmount();

 private:
  // `tfrecordfs commit` asks through the control socket (cli/control.h),
  // served by the committer thread until the session ends.
  // `rebase`: `tfrecordfs commit --rebase` (vfs::Filesystem::Commit).
  std::string CommitNow(uint64_t seq, bool rebase);
  std::unique_ptr<ControlServer> control_;
  std::thread committer_;

  // A failed mount leaves no store behind that it created itself.
  int Fail();

  CliOptions cli_;
  std::string mnt_real_;    // the mount point, resolved
  uint64_t log_start_ = 0;  // where this mount's lines begin in the log file
  bool store_existed_ = false;
  // The s3:// or gs:// source staging packs into; "" for a local pack.
  std::string bucket_;
  // Declared in the order they are needed: the filesystem uses the index
  // store and the staging store, and goes first.
  std::unique_ptr<staging::Store> store_;  // null: a read-only mount without a store
  std::optional<index::IndexStore> index_store_;
  // Records deleted from the shards (null: a read-only mount).
  std::unique_ptr<staging::DeletionList> deletions_;
  // Records of the shards being edited or added (null: a read-only mount).
  std::unique_ptr<staging::Store> edits_;
  std::unique_ptr<vfs::Filesystem> fs_;
};

std::optional<int> Mount::Prepare() {
  if (int code = CheckMountpoint(cli_.session.mountpoint); code != 0) return code;
  mnt_real_ = RealPath(cli_.session.mountpoint).value_or(cli_.session.mountpoint);
  // A detached daemon's stderr goes to /dev/null, and containers often have
  // no syslog socket: it logs to a file as well (any daemon, with -o log),
  // and `tfrecordfs unmount` points at it when something was logged.
  if (!cli_.session.foreground || !cli_.log_path.empty()) {
    if (cli_.log_path.empty()) cli_.log_path = DefaultLogPath(mnt_real_);
    auto start =
        log::UseFile(cli_.log_path, absl::StrCat("mount of ", RedactedSources(cli_.vfs.sources),
                                                 " on ", mnt_real_, " (pid ", ::getpid(), ")"));
    if (start.ok()) {
      log_start_ = *start;
    } else {
      log::Warning("no log file: ", start.status().message());
      cli_.log_path.clear();
    }
  }
  bool objects = false;
  for (const std::string& source : cli_.vfs.sources) {
    if (objstore::IsObjectUrl(source)) {  // listed when the shards are scanned
      objects = true;
      continue;
    }
    if (struct stat st; ::stat(source.c_str(), &st) != 0) {
      log::Error("source ", source, ": ", std::strerror(errno));
      return kExitFailed;
    }
  }

  if (std::any_of(cli_.vfs.sources.begin(), cli_.vfs.sources.end(),
                  [](const std::string& s) { return source::OnRemoteStorage(s); })) {
    // Remote sources are read ahead in blocks of a MiB by a pool of threads
    // and walked in parts of up to 8 MiB (source/readahead.h): each thread's
    // malloc arena would keep what it freed, beyond the cache budgets (a
    // bucket mount held 160-200 MB against 96 MiB of caches). Two arenas,
    // and every block of 256 KiB or more mapped on its own and returned to
    // the kernel when freed: the daemon's memory follows the budgets.
    ::mallopt(M_ARENA_MAX, 2);
    ::mallopt(M_MMAP_THRESHOLD, 256 << 10);
  }
  if (objects && !cli_.read_only && PacksIntoBucket(cli_.vfs.sources)) {
    // Staging packs back into the bucket at unmount (cli/pack_upload.h);
    // edits and deletions of an s3:// object's records are committed by
    // rewriting it with conditional writes (repack/bucket_rewrite.h).
    bucket_ = cli_.vfs.sources.front();
    log::Info("sources include object storage URLs: staging packs into ", bucket_,
              " at unmount; edited and deleted records of s3:// objects are written at commit "
              "or unmount, each object only if no other writer replaced it meanwhile");
  } else if (objects && !cli_.read_only) {
    log::Info(
        "sources include object storage URLs: mounted read-only (staging packs only into an "
        "s3:// or gs:// first source)");
    cli_.read_only = true;
  }
  fuse::SessionOptions& session = cli_.session;
  if (cli_.read_only) session.fuse_options.emplace_back("ro");
  // The kernel opens files without asking the daemon, read-only mount or
  // not, so a warm read costs no round trip (fuse::OpsOptions::skip_open).
  // On a read-write one, what is written still reaches the daemon: a write
  // of a record file is an edit (checked out at its first WRITE or
  // truncation), and one the daemon refuses (a plain file, a bad value)
  // fails, its cached pages dropped. Where the kernel has no such support,
  // staging files at least are written without handles.
  session.ops.skip_open = !cli_.always_open;
  session.ops.staging_without_handles = !cli_.always_open && !cli_.read_only;
  bool has_fsname = false;
  for (const auto& o : session.fuse_options) has_fsname |= absl::StartsWith(o, "fsname=");
  if (!has_fsname) {
    // /proc/mounts is world-readable: no query string (a presigned URL's
    // credentials) goes there.
    std::string fsname = objstore::RedactSource(cli_.vfs.sources.front());
    for (char& c : fsname) {
      if (c == ',') c = '_';  // a comma would split the option list
    }
    session.fuse_options.push_back("fsname=" + fsname);
  }
  session.fuse_options.push_back("subtype=tfrecordfs");
  return std::nullopt;
}

std::optional<int> Mount::OpenStore() {
  if (cli_.staging_dir.empty()) cli_.staging_dir = DefaultStagingDir(cli_.vfs.sources);
  if (cli_.pack.output_dir.empty()) cli_.pack.output_dir = DefaultOutputDir(cli_.vfs.sources);
  struct stat store_st;
  store_existed_ = ::stat(cli_.staging_dir.c_str(), &store_st) == 0;
  auto store = staging::Store::Open(cli_.staging_dir, {.read_only = cli_.read_only});
  if (!store.ok() && ErrnoOf(store.status()) == EBUSY && cli_.vfs.view != vfs::ViewKind::kRecords) {
    // An image view of a dataset that a read-write mount already edits:
    // shown read-only beside it (the views coexist; cleaning through this
    // one needs the store to itself).
    log::Info(store.status().message(),
              "; this view=gallery/classes mount is read-only (rm and mv need the store)");
    cli_.read_only = true;
    cli_.session.fuse_options.emplace_back("ro");
    cli_.session.ops.skip_open = !cli_.always_open;
    cli_.session.ops.staging_without_handles = false;
    store = staging::Store::Open(cli_.staging_dir, {.read_only = true});
    if (!store.ok() && absl::IsNotFound(store.status())) store = nullptr;
  }
  if (!store.ok() && !(cli_.read_only && absl::IsNotFound(store.status()))) {
    log::Error(store.status().message());
    return kExitFailed;
  }
  if (store.ok()) store_ = std::move(*store);
  if (store_ != nullptr && !cli_.read_only) {
    if (auto s = repack::Recover(staging::PackJournalFile(store_->dir()), store_->records_dir());
        !s.ok()) {
      log::Error("cannot recover the interrupted pack in ", store_->dir(), ": ", s.message());
      return kExitFailed;
    }
    ::unlink(staging::PackReportFile(store_->dir()).c_str());
    // Shards an interrupted unmount packed but did not upload: uploaded
    // now, so that this mount lists them.
    if (!bucket_.empty()) FinishBucketUploads(bucket_, store_->dir());
  }
  // Records deleted from the shards and not yet committed (kept in the
  // store, staging/deletions.h); a rewrite a crash interrupted is finished
  // or rolled back first (repack/rewrite.h).
  if (store_ != nullptr && !cli_.read_only) {
    auto list = staging::DeletionList::Load(staging::DeletionsPath(store_->dir()));
    if (!list.ok()) {
      log::Error("cannot read the deleted records: ", list.status().message());
      return Fail();
    }
    deletions_ = *std::move(list);
    // Records of the shards being edited or added (staging/edits.h).
    auto edits =
        staging::Store::Open(staging::EditsStoreDir(store_->dir()), {.reserve_journal = false});
    if (!edits.ok()) {
      log::Error("cannot open the edit store: ", edits.status().message());
      return Fail();
    }
    edits_ = *std::move(edits);
    // The indexes of a shard whose rewrite recovery finishes follow it
    // (index_dir entries are not known here: found stale, then ignored).
    index::StoreOptions index_options;
    index_options.cache_dir = cli_.index_cache ? index::DefaultCacheDir() : "";
    index_options.beside = cli_.index_beside;
    index_options.durable = false;
    index::IndexStore indexes(index_options);
    auto follow = [&indexes](const std::string& path, const std::vector<uint64_t>* offsets,
                             index::WalkedShard* walked) {
      index::FollowRewrite(&indexes, path, "", offsets, walked);
    };
    // Objects first: a rewrite the store took drops its entry, whose edit
    // folders RecoverRewrites then removes; uploads a crash left are
    // aborted.
    if (!bucket_.empty()) {
      for (const std::string& line : repack::RecoverObjectRewrites(deletions_.get())) {
        log::Info(line);
      }
    }
    for (const std::string& line :
         repack::RecoverRewrites(deletions_.get(), edits_->records_dir(), follow)) {
      log::Info(line);
    }
    cli_.vfs.deletions = deletions_.get();
    cli_.vfs.edits = edits_.get();
  }
  cli_.vfs.staging = store_.get();
  return std::nullopt;
}

int Mount::Fail() {
  if (store_ != nullptr && !cli_.read_only && !store_existed_) {
    staging::RemoveIfEmpty(store_->dir());
  }
  return kExitFailed;
}

std::optional<int> Mount::Serve() {
  // Shard indexes: from -o index_dir, else the per-user cache, else walked
  // (and then saved to the cache). See index/index_store.h.
  index::IndexStore& index_store = index_store_.emplace(
      index::StoreOptions{.cache_dir = cli_.index_cache ? index::DefaultCacheDir() : "",
                          .shared_dir = cli_.index_dir,
                          .beside = cli_.index_beside,
                          .verify_shared = cli_.index_verify,
                          .durable = false,
                          .span = cli_.gz_span,
                          .walk_mode = cli_.walk_mode,
                          .max_records = cli_.max_records});
  cli_.vfs.on_index_mismatch = [&index_store](const std::string& path) { index_store.Drop(path); };
  cli_.vfs.index_store = &index_store;
  // view=classes decodes every record not grouped before: show how far.
  std::optional<ProgressBar> bar;
  if (cli_.vfs.view == vfs::ViewKind::kClasses) {
    bar.emplace(TotalBytes(cli_.vfs.sources), StderrIsTerminal());
    cli_.vfs.on_group_progress = [&bar](uint64_t shards, uint64_t records, uint64_t bytes) {
      bar->Add(shards, records, bytes);
    };
  }
  auto fs = vfs::Filesystem::Create(cli_.vfs);
  if (bar) bar->Finish();
  if (!fs.ok()) {
    log::Error(fs.status().message());
    return Fail();
  }
  fs_ = std::move(*fs);
  log::Info(index_store.Summary());
  const vfs::Stats stats = fs_->GetStats();
  const bool staging = store_ != nullptr;
  log::Info("indexed ", stats.records, " record(s) in ", stats.shards, " shard(s); mounting on ",
            cli_.session.mountpoint, staging ? "; staging store " : "; no staging store",
            staging ? store_->dir() : "", cli_.read_only ? " (read-only)" : "");
  const std::string store_dir = staging ? store_->dir() : cli_.staging_dir;
  bool served = false;
  cli_.session.on_ready = [&] {
    served = true;
    // After the detach (a fork keeps no threads).
    if (deletions_ != nullptr || !bucket_.empty()) {
      auto control = ControlServer::Listen(ControlSocketFile(store_->dir()));
      if (control.ok()) {
        control_ = std::move(*control);
        committer_ = std::thread([this] {
          uint64_t seq = 0;
          control_->Serve([&](absl::string_view request) -> std::string {
            if (request != "commit" && request != "commit --rebase") {
              return absl::StrCat("result: refused\nunknown request \"", request, "\"\n");
            }
            return CommitNow(++seq, request == "commit --rebase");
          });
        });
      } else {
        log::Warning(
            "tfrecordfs commit will not reach this mount (edits are committed at "
            "unmount): ",
            control.status().message());
      }
    }
    auto s = WriteMountRecord({mnt_real_, store_dir, static_cast<long>(::getpid()), cli_.read_only,
                               cli_.log_path, log_start_, staging ? cli_.vfs.staging_name : ""});
    if (!s.ok()) log::Warning("tfrecordfs unmount will not find this mount: ", s.message());
  };
  absl::Status s = fuse::RunSession(fs_.get(), cli_.session);
  if (control_ != nullptr) control_->Stop();
  if (committer_.joinable()) committer_.join();
  control_.reset();
  if (!s.ok()) {
    log::Error(s.message());
    if (!served) return Fail();
    RemoveMountRecord(mnt_real_);
    return kExitFailed;
  }
  return std::nullopt;
}

std::string Mount::CommitNow(uint64_t seq, bool rebase) {
  log::Info("commit requested (tfrecordfs commit", rebase ? " --rebase" : "", ")");
  auto rewritten = fs_->Commit(/*reopen=*/true, rebase);
  std::string text;
  bool ok = rewritten.ok();
  if (!rewritten.ok()) {
    text = absl::StrCat(rewritten.status().message(), "\n");
  } else if (rewritten->empty()) {
    text = "nothing to commit: no record of the mounted shards is edited, added or deleted\n";
  } else {
    for (const auto& r : *rewritten) ok = ok && r.status.ok();
    text = repack::RewriteSummary(*rewritten);
  }
  // The result goes back to the `tfrecordfs commit` that asked, which
  // prints it, and stays in the store's last-commit.txt. A failure is no error of the mount's: the
  // edits stay pending, and what still holds at unmount is in that commit's
  // own report. Logged as an error, a failure a later commit fixed would
  // still be repeated by `tfrecordfs unmount` (which points at the log's
  // errors and warnings).
  log::Info(ok ? "" : "commit failed (the edits stay pending): ", text);
  const std::string answer = absl::StrCat(ok ? kResultOk : "result: failed", "\n", text);
  if (auto w = WriteFileAtomically(staging::CommitReportFile(store_->dir()),
                                   absl::StrCat("commit ", ::getpid(), ".", seq, "\n", answer));
      !w.ok()) {
    log::Warning("cannot keep the commit report: ", w.message());
  }
  return answer;
}

int Mount::PackOnUnmount() {
  // A read-only mount writes nothing, not even a report (`tfrecordfs
  // unmount` knows it from the mount record): what an earlier mount left
  // staged stays staged for the next read-write one.
  if (cli_.read_only) {
    RemoveMountRecord(mnt_real_);
    // A test hook (tests/mount/mount_cli_test.cc): a daemon slow to exit,
    // as one releasing millions of cached files is, for unmount's progress.
    if (const char* fault = std::getenv("TFRECORDFS_FAULT");
        fault != nullptr && absl::string_view(fault) == "slow_exit") {
      ::sleep(2);
    }
    return kExitOk;
  }
  // Files written without a handle (the kernel opened them itself) that
  // the kernel never forgot: checked now, so a record left staged keeps
  // its kinds (staging/store.h), the same the mount checked against.
  naming::FeatureTypes& types = fs_->staging_types();
  store_->CheckAllWritten(types);
  repack::PackOptions& pack = cli_.pack;
  pack.records_dir = store_->records_dir();
  pack.journal_path = staging::PackJournalFile(store_->dir());
  pack.journal_reserve = staging::JournalReserveFile(store_->dir());
  pack.remove_packed = true;
  pack.types = &types;
  pack.compression = cli_.compression ? *cli_.compression : SourcesCodec(*fs_);
  if (pack.compression == source::Codec::kArrayRecord) {
    std::vector<std::string> paths;
    for (const auto& shard : fs_->shards()) paths.push_back(shard.index->path());
    pack.array_record = arrayrecord::OptionsOfFiles(paths);
  }
  // -o output_dir is created when missing, as `pack`, `repair` and
  // `reshard` create theirs; only when something is staged, so that an
  // unmount with nothing to pack leaves no empty folder behind. A folder
  // that cannot be made fails the pack, which says why.
  if (bucket_.empty()) {
    absl::string_view first;
    if (auto staged = ListDir::Open(pack.records_dir); staged.ok() && staged->Next(&first)) {
      (void)MakeDirs(pack.output_dir, 0755);
    }
  }
  const repack::PackReport report =
      bucket_.empty() ? repack::Pack(pack) : PackIntoBucket(bucket_, pack, store_->dir());
  const char* result = !report.status.ok()    ? "result: failed"
                       : !report.left.empty() ? "result: left"
                                              : kResultOk;
  if (!report.status.ok()) {
    log::Error("pack failed; staged records are kept in ", store_->records_dir(), ": ",
               report.status.message());
  } else if (!report.shards.empty() || !report.left.empty()) {
    log::Info(report.Summary());
  }
  std::string text = absl::StrCat(result, "\n", report.Summary());
  int exit_code = report.status.ok() && report.left.empty() ? kExitOk : kExitFailed;
  // Then the shards with deleted, edited or added records are rewritten.
  if (deletions_ != nullptr && !deletions_->Snapshot().empty()) {
    auto committed = fs_->Commit(/*reopen=*/false);
    std::vector<repack::RewrittenShard> rewritten;
    if (committed.ok()) rewritten = *std::move(committed);
    const std::string summary = committed.ok() ? repack::RewriteSummary(rewritten)
                                               : absl::StrCat(committed.status().message(), "\n");
    absl::StrAppend(&text, summary);
    bool all_ok = committed.ok();
    for (const auto& r : rewritten) all_ok = all_ok && r.status.ok();
    if (all_ok) {
      log::Info(summary);
    } else {
      log::Error(summary);
      exit_code = kExitFailed;
      if (absl::StartsWith(text, absl::StrCat(kResultOk, "\n"))) {
        text = absl::StrCat("result: failed", text.substr(std::strlen(kResultOk)));
      }
    }
  }
  if (auto w = WriteFileAtomically(staging::PackReportFile(store_->dir()), text); !w.ok()) {
    log::Error("cannot write the pack report: ", w.message());
  }
  RemoveMountRecord(mnt_real_);
  return exit_code;
}

}  // namespace

int MountMain(int argc, char** argv) {
  CliOptions cli;
  if (auto stop = ParseMountCommandLine(argc, argv, &cli)) return *stop;
  objstore::SetDefaultObjectOptions(cli.objects);  // vfs::Options does not carry them
  Mount mount(std::move(cli));
  if (auto stop = mount.Prepare()) return *stop;
  if (auto stop = mount.OpenStore()) return *stop;
  if (auto stop = mount.Serve()) return *stop;
  return mount.PackOnUnmount();
}

}  // namespace tfrecordfs::cli
