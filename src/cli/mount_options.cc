// The mount's command line (mount_options.h): the usage text, our -o options
// (kMountOptions), the FUSE and mount(8) options we pass on or ignore.
#include "src/cli/mount_options.h"

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/cli/commands.h"
#include "src/cli/runtime.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/objstore/listing.h"
#include "tfrecordfs/staging/store.h"
#include "tfrecordfs/vfs/node_id.h"

#ifndef TFRECORDFS_VERSION
#define TFRECORDFS_VERSION "unknown"
#endif

namespace tfrecordfs::cli {
namespace {

// The usage text in three parts: our -o options (kMountOptions) and the FUSE
// and mount(8) options we accept go between kUsageOptions and kUsageTail,
// generated from the tables below (MountOptionsHelp), so --help cannot
// drift from what the parser accepts.
constexpr char kUsageOptions[] = R"(Usage: tfrecordfs [options] SOURCE... MOUNTPOINT
       tfrecordfs unmount MOUNTPOINT
       tfrecordfs commit [--timeout SECONDS] MOUNTPOINT
       tfrecordfs status [--json] MOUNTPOINT
       tfrecordfs pack [--shard-size SIZE] [--prefix NAME] [--compression C] DIR OUTPUT_DIR
       tfrecordfs index [--beside | --index-dir PATH] [--dali-dir DIR] [--walk MODE]
                        [--force] SOURCE...
       tfrecordfs count [--json] SOURCE...
       tfrecordfs schema [--all | --sample N] [--json] SOURCE...
       tfrecordfs show [--json] SHARD RECORD...
       tfrecordfs verify [--json] SOURCE...
       tfrecordfs repair [--json] SOURCE... --output DIR
       tfrecordfs reshard [--shards N | --shard-size SIZE] [--prefix NAME]
                          [--compression C] [--shuffle [--seed S]] SOURCE... --output DIR

Mounts TensorFlow TFRecord shards as directories: one directory per shard,
one per record, one file per feature. SOURCE is a shard file or a directory
(mirrored recursively; shards are recognised by content, other files are
shown as they are). On a read-write mount, staging/ takes new records and
the records of the shards take edits (echo, sed -i, cp, rm -r, mkdir, mv),
written into the shards at unmount or by `tfrecordfs commit`. count, schema,
show, verify, repair and reshard read shards without a mount
(`tfrecordfs COMMAND --help`).

Options:
  -f                 stay in the foreground (default: detach once the mount
                     is ready to serve)
  -d                 debug: log every FUSE request (implies -f)
  -s                 single-threaded request loop
  -o OPT[,OPT...]    mount options: these of tfrecordfs, then the FUSE and
                     mount(8) ones it accepts (listed below them):
)";

constexpr char kUsageTail[] = R"(  -h, --help         show this help and exit
  -V, --version      show the version and exit
  --list-mount-options  the -o options, one a line (for shell completion)

New records: make folders of feature files under MOUNTPOINT/staging/ (or
`cp -r` a record there). On unmount they are packed, crash-safely, into new
shards in the output directory. `tfrecordfs unmount MOUNTPOINT` unmounts,
waits for the pack and reports; `fusermount3 -u MOUNTPOINT` works too.
`tfrecordfs status MOUNTPOINT` says meanwhile what is staged and what the
pack would leave staged, and why; a staged file a write was refused for says
why in user.tfrecordfs.error.

Extended attributes (getfattr -d PATH): a record folder has
user.tfrecordfs.shard, .record, .offset, .length (.compressed_offset in a
GZIP/ZLIB shard) and, once found damaged, .error with the reason; a feature
file has .feature (the real name) and .kind (int64, float, text, bytes,
tensor DTYPE, ...); a shard folder .shard, .records and .codec.

Exit status: 0 on success, 1 when the mount or a source fails, 2 on a usage
error. With fstab: `SOURCE MOUNTPOINT fuse.tfrecordfs ro,allow_other 0 0`.
)";

int Usage(const std::string& message) { return UsageError("", message); }

// ---- Our -o options: one table gives --help, the parser, the names the
// bash completion offers (tfrecordfs --list-mount-options), and what
// mount_cli_test checks against the man page's OPTIONS.

// Parses `value` (empty for a flag) into `cli`; an InvalidArgument error's
// message names the option.
using ParseFn = absl::Status (*)(absl::string_view value, CliOptions* cli);

struct MountOption {
  absl::string_view name;   // cache_mb
  absl::string_view value;  // what it takes, as --help names it ("N"); "" for a flag
  absl::string_view help;   // one paragraph, filled by MountOptionsHelp
  ParseFn parse;
};

// A number of MiB from 1 (0 too when `zero_ok`) to 2^20, as bytes.
std::optional<size_t> Mib(absl::string_view v, bool zero_ok) {
  size_t mb = 0;
  if (!absl::SimpleAtoi(v, &mb) || (mb == 0 && !zero_ok) || mb > (size_t{1} << 20)) {
    return std::nullopt;
  }
  return mb << 20;
}

constexpr MountOption kMountOptions[] = {
    {"cache_records", "N", "parsed records kept in memory (default 65536)",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       if (!absl::SimpleAtoi(v, &cli->vfs.cache_records) || cli->vfs.cache_records == 0) {
         return absl::InvalidArgumentError("cache_records needs a positive number");
       }
       return absl::OkStatus();
     }},
    {"cache_mb", "N", "...and at most N MiB of them (default 16)",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       auto bytes = Mib(v, false);
       if (!bytes) return absl::InvalidArgumentError("cache_mb needs a positive number of MiB");
       cli->vfs.cache_bytes = *bytes;
       return absl::OkStatus();
     }},
    {"index_threads", "N", "threads for the header walk (default: CPUs, max 16)",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       if (!absl::SimpleAtoi(v, &cli->vfs.index_threads) || cli->vfs.index_threads < 0) {
         return absl::InvalidArgumentError("index_threads needs a number");
       }
       return absl::OkStatus();
     }},
    {"max_open", "N",
     "shard files kept open at once (default 1024; at most half the descriptor limit, "
     "`ulimit -n`): any number of shards mounts, the least recently read are closed and "
     "reopened on demand; raise it (and the limit) when reading many shards in parallel. "
     "Staged files need no option: at most an eighth of `ulimit -n` (16 to 1024) stay open, "
     "however many are staged",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       if (!absl::SimpleAtoi(v, &cli->vfs.max_open_shards) || cli->vfs.max_open_shards == 0) {
         return absl::InvalidArgumentError("max_open needs a positive number of shard files");
       }
       return absl::OkStatus();
     }},
    {"walk", "MODE",
     "how shard headers are read when indexing: headers (one read per header: local disks), "
     "blocks (8 MiB sequential reads: network storage) or auto (blocks on "
     "FUSE/NFS/CIFS/Lustre/Ceph/9p, else headers; the default); on network storage 32 shards "
     "are walked at once unless index_threads says otherwise",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       if (v == "auto") {
         cli->walk_mode = index::WalkMode::kAuto;
       } else if (v == "headers") {
         cli->walk_mode = index::WalkMode::kHeaders;
       } else if (v == "blocks") {
         cli->walk_mode = index::WalkMode::kBlocks;
       } else {
         return absl::InvalidArgumentError("walk needs auto, headers or blocks");
       }
       return absl::OkStatus();
     }},
    {"max_shard_records", "N",
     "the most records one shard may have (default 50000000; at most 268435456): an index "
     "costs 8 bytes per record, so this bounds what one shard may cost, however well it "
     "compresses; a shard with more is not indexed, and shown as the plain file it is with an "
     "error in the log",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       if (!absl::SimpleAtoi(v, &cli->max_records) || cli->max_records == 0 ||
           cli->max_records > vfs::kMaxRecordsPerShard) {
         return absl::InvalidArgumentError("max_shard_records needs a number from 1 to 268435456");
       }
       return absl::OkStatus();
     }},
    {"gz_span", "SIZE",
     "GZIP/ZLIB shards: a checkpoint that gives random access after every SIZE compressed or "
     "uncompressed bytes, whichever come first (default 1M; smaller: faster reads, larger "
     "index)",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       auto size = ParseSize(v);
       if (!size.ok() || *size < (64 << 10) || *size > (uint64_t{1} << 34)) {
         return absl::InvalidArgumentError("gz_span needs a size from 64K to 16G, such as 1M");
       }
       cli->gz_span = *size;
       return absl::OkStatus();
     }},
    {"inflate_cache_mb", "N",
     "decompressed bytes of GZIP/ZLIB shards kept for readers, in MiB (default 32)",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       auto bytes = Mib(v, false);
       if (!bytes)
         return absl::InvalidArgumentError("inflate_cache_mb needs a positive number of MiB");
       cli->vfs.inflate_cache_bytes = *bytes;
       return absl::OkStatus();
     }},
    {"readahead_mb", "N",
     "on network storage, records read in order (a find, cat */label) are read ahead in 1 MiB "
     "blocks (4 MiB for objects), 8 at once, 8 to 32 MiB ahead (at most N/2) and into the next "
     "shard, keeping at most N MiB (default 64; 0: off)",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       auto bytes = Mib(v, true);
       if (!bytes) return absl::InvalidArgumentError("readahead_mb needs a number of MiB");
       cli->vfs.readahead_bytes = *bytes;
       return absl::OkStatus();
     }},
    {"index_dir", "PATH",
     "read shard indexes from PATH first (read-only; made by `tfrecordfs index --index-dir "
     "PATH`)",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       if (v.empty()) return absl::InvalidArgumentError("index_dir needs a directory");
       cli->index_dir = std::string(v);
       return absl::OkStatus();
     }},
    {"noindexcache", "",
     "neither read nor write the per-user index cache (~/.cache/tfrecordfs/index)",
     [](absl::string_view, CliOptions* cli) -> absl::Status {
       cli->index_cache = false;
       return absl::OkStatus();
     }},
    {"index_verify", "",
     "check indexes from index_dir or beside the shards against each shard's header chain "
     "(8 MiB sequential reads) before using them: for index directories other users can write",
     [](absl::string_view, CliOptions* cli) -> absl::Status {
       cli->index_verify = true;
       return absl::OkStatus();
     }},
    {"nobeside", "",
     "do not read indexes kept beside the shards (<shard>.tfri, written by `tfrecordfs index "
     "--beside`)",
     [](absl::string_view, CliOptions* cli) -> absl::Status {
       cli->index_beside = false;
       return absl::OkStatus();
     }},
    {"no_sign_request", "",
     "s3:// and gs:// SOURCEs: send every request anonymously, whatever credentials are "
     "configured (public buckets; the aws CLI's --no-sign-request)",
     [](absl::string_view, CliOptions* cli) -> absl::Status {
       cli->objects.no_sign_request = true;
       return absl::OkStatus();
     }},
    {"gcs_token_file", "PATH",
     "gs:// SOURCEs: send the OAuth access token in PATH (what `gcloud auth "
     "print-access-token` prints), read again whenever the file changes",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       if (v.empty()) return absl::InvalidArgumentError("gcs_token_file needs a file");
       cli->objects.gcs_token_file = std::string(v);
       return absl::OkStatus();
     }},
    {"multipart_mb", "N",
     "s3:// and gs:// SOURCEs packed into at unmount: upload a new shard larger than N MiB as "
     "a multipart upload in N MiB parts, a smaller one with one PUT (default 8, from 5 to "
     "5120, S3's part sizes)",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       uint64_t mb = 0;
       if (!absl::SimpleAtoi(v, &mb) || mb < 5 || mb > 5120) {
         return absl::InvalidArgumentError(
             "multipart_mb needs a number of MiB from 5 to 5120 (S3's part sizes)");
       }
       cli->objects.multipart_bytes = mb << 20;
       return absl::OkStatus();
     }},
    {"request_timeout", "SECONDS",
     "object storage SOURCEs: give up on a request (a listing page, a HEAD, a ranged GET, "
     "all its retries together) after SECONDS (default 120); the read fails with EIO and the "
     "log says so",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       long seconds = 0;
       if (!absl::SimpleAtoi(v, &seconds) || seconds < 1 || seconds > 86400) {
         return absl::InvalidArgumentError(
             "request_timeout needs a number of seconds from 1 to 86400");
       }
       cli->objects.request_timeout_s = seconds;
       return absl::OkStatus();
     }},
    {"nosplice", "", "copy read data instead of splicing it from shards",
     [](absl::string_view, CliOptions* cli) -> absl::Status {
       cli->session.ops.splice = false;
       return absl::OkStatus();
     }},
    {"max_background", "N",
     "FUSE requests the kernel keeps in flight in the background (read-ahead, async reads), "
     "1 to 65535 (default: the kernel's, 12)",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       unsigned n = 0;
       if (!absl::SimpleAtoi(v, &n) || n < 1 || n > 65535) {
         return absl::InvalidArgumentError("max_background needs a number from 1 to 65535");
       }
       cli->session.ops.max_background = n;
       return absl::OkStatus();
     }},
    {"clone_fd", "",
     "each request thread reads its own clone of the FUSE device (default: one shared)",
     [](absl::string_view, CliOptions* cli) -> absl::Status {
       cli->session.clone_fd = true;
       return absl::OkStatus();
     }},
    {"opendir", "",
     "send every opendir/releasedir to the daemon (default: the kernel opens directories and "
     "caches their listings itself where it can)",
     [](absl::string_view, CliOptions* cli) -> absl::Status {
       cli->session.ops.skip_opendir = false;
       return absl::OkStatus();
     }},
    {"ro", "", "read-only mount: staging/ refuses writes, nothing is packed on unmount",
     [](absl::string_view, CliOptions* cli) -> absl::Status {
       cli->read_only = true;
       return absl::OkStatus();
     }},
    {"rw", "", "read-write mount (the default); of ro and rw the last one wins",
     [](absl::string_view, CliOptions* cli) -> absl::Status {
       cli->read_only = false;
       return absl::OkStatus();
     }},
    {"open", "",
     "send every open/flush/release to the daemon and give staged files handles (default: "
     "the kernel opens files itself, no round trip per open; writes are judged when they "
     "arrive: a record file's first write checks its record out, a refused one fails; staged "
     "files are checked at write(), and close() never fails)",
     [](absl::string_view, CliOptions* cli) -> absl::Status {
       cli->always_open = true;
       return absl::OkStatus();
     }},
    {"timeout", "SECONDS",
     "kernel cache time for names and attributes (default 86400: shard data is immutable)",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       double t;
       if (!absl::SimpleAtod(v, &t) || t < 0)
         return absl::InvalidArgumentError("timeout needs a number of seconds");
       cli->session.ops.entry_timeout = cli->session.ops.attr_timeout =
           cli->session.ops.negative_timeout = t;
       return absl::OkStatus();
     }},
    {"verbose", "", "log at debug level",
     [](absl::string_view, CliOptions*) -> absl::Status {
       log::SetLevel(log::Level::kDebug);
       return absl::OkStatus();
     }},
    {"log", "PATH",
     "also log to PATH (a detached daemon always logs to a file; default "
     "~/.local/state/tfrecordfs/log/<mount point>.log, which `tfrecordfs unmount` names when "
     "something was logged)",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       if (v.empty()) return absl::InvalidArgumentError("log needs a file path");
       cli->log_path = std::string(v);
       return absl::OkStatus();
     }},
    {"noxattr", "", "no extended attributes (see below)",
     [](absl::string_view, CliOptions* cli) -> absl::Status {
       cli->session.ops.xattr = false;
       return absl::OkStatus();
     }},
    {"staging", "NAME", "name of the writable folder at the root (default \"staging\")",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       if (!staging::CheckName(v).ok())
         return absl::InvalidArgumentError("staging needs a plain folder name");
       cli->vfs.staging_name = std::string(v);
       return absl::OkStatus();
     }},
    {"staging_dir", "PATH",
     "where staged bytes live on disk (default "
     "~/.local/state/tfrecordfs/staging/<source>-<crc>)",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       if (v.empty()) return absl::InvalidArgumentError("staging_dir needs a directory");
       cli->staging_dir = std::string(v);
       return absl::OkStatus();
     }},
    {"max_edited", "N",
     "records checked out for editing (or added to shards) at once, until a commit (default "
     "20000): each edited record is a copy of all its files in the edit store, and each "
     "file costs a disk block, so this bounds the store; an edit beyond it fails with EDQUOT "
     "until `tfrecordfs commit` applies the pending ones",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       if (!absl::SimpleAtoi(v, &cli->vfs.max_edited) || cli->vfs.max_edited == 0) {
         return absl::InvalidArgumentError("max_edited needs a positive number of records");
       }
       return absl::OkStatus();
     }},
    {"output_dir", "PATH",
     "where the pack writes new shards on unmount (default: the first source directory; "
     "created when missing, as by pack, repair and reshard)",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       if (v.empty()) return absl::InvalidArgumentError("output_dir needs a directory");
       cli->pack.output_dir = std::string(v);
       return absl::OkStatus();
     }},
    {"prefix", "NAME",
     "new shard names: NAME-00000-of-0000N.tfrecord (default staged-<UTC yyyymmddThhmmss>)",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       if (!repack::ValidatePrefix(v).ok())
         return absl::InvalidArgumentError("prefix must be a plain file name prefix");
       cli->pack.prefix = std::string(v);
       return absl::OkStatus();
     }},
    {"shard_size", "SIZE",
     "maximum bytes per new shard, e.g. 64M (default 128M; uncompressed bytes for compressed "
     "shards)",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       auto size = ParseSize(v);
       if (!size.ok())
         return absl::InvalidArgumentError("shard_size needs a size such as 64M or 1G");
       cli->pack.shard_size = *size;
       return absl::OkStatus();
     }},
    {"view", "VIEW",
     "what the mount shows: records (the default: a folder per record, a file per feature), "
     "gallery (each shard folder a flat folder of its records' images) or classes (a folder per "
     "value of class_feature, holding the images of its records); gallery and classes show "
     "no staging folder and take only rm of an image and mv between class folders (VIEWS in "
     "tfrecordfs(1))",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       if (v == "records") {
         cli->vfs.view = vfs::ViewKind::kRecords;
       } else if (v == "gallery") {
         cli->vfs.view = vfs::ViewKind::kGallery;
       } else if (v == "classes") {
         cli->vfs.view = vfs::ViewKind::kClasses;
       } else {
         return absl::InvalidArgumentError("view needs records, gallery or classes");
       }
       return absl::OkStatus();
     }},
    {"class_feature", "NAME",
     "view=classes: the feature whose one value names a record's class folder (grouped at the "
     "first mount, kept with the index cache)",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       if (v.empty()) return absl::InvalidArgumentError("class_feature needs a feature name");
       cli->vfs.class_feature = std::string(v);
       return absl::OkStatus();
     }},
    {"compression", "C",
     "new shards: none, gzip (.tfrecord.gz) or zlib (.tfrecord.zlib); default: the sources' "
     "codec when every source shard has the same one, else none",
     [](absl::string_view v, CliOptions* cli) -> absl::Status {
       cli->compression = source::ParseCodecName(v);
       if (!cli->compression)
         return absl::InvalidArgumentError("compression needs none, gzip or zlib");
       return absl::OkStatus();
     }},
};

const MountOption* FindMountOption(absl::string_view name) {
  for (const MountOption& o : kMountOptions) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

// The FUSE and generic mount flags we hand to libfuse as they are. An
// allow-list: anything else is a typo we report ourselves, before indexing.
// Only what a mount with libfuse 3.14 (Debian 12) really takes, each one
// mounted by mount_cli_test; not there, because the mount then fails after
// the index walk: relatime, strictatime, diratime, lazytime and their no-
// forms (libfuse 3.14 rejects them), blksize= (the kernel takes it only for
// fuseblk), max_read= (libfuse ends the session at INIT: our init() does
// not set the same limit).
constexpr absl::string_view kPassedFlags[] = {"allow_other",  "allow_root", "default_permissions",
                                              "auto_unmount", "atime",      "noatime",
                                              "dev",          "nodev",      "suid",
                                              "nosuid",       "exec",       "noexec",
                                              "sync",         "async",      "dirsync"};

// Passed-through `key=value` FUSE options, with the value's name in --help.
// The SELinux contexts mount only where SELinux is enabled.
struct PassedKey {
  absl::string_view key;
  absl::string_view value;
};
constexpr PassedKey kPassedKeys[] = {{"fsname", "NAME"},        {"subtype", "NAME"},
                                     {"context", "CONTEXT"},    {"fscontext", "CONTEXT"},
                                     {"defcontext", "CONTEXT"}, {"rootcontext", "CONTEXT"}};

// Words of fstab and mount(8) (mount.fuse3 hands some of them on) that mean
// nothing to the filesystem; and prefixes of such words.
constexpr absl::string_view kIgnoredWords[] = {"defaults", "auto",  "noauto", "user",    "nouser",
                                               "users",    "owner", "group",  "_netdev", "nofail"};
constexpr absl::string_view kIgnoredPrefixes[] = {"x-", "comment="};

bool IsIgnoredMountWord(absl::string_view opt) {
  for (absl::string_view w : kIgnoredWords) {
    if (opt == w) return true;
  }
  for (absl::string_view p : kIgnoredPrefixes) {
    if (absl::StartsWith(opt, p)) return true;
  }
  return false;
}

bool IsPassedFlag(absl::string_view opt) {
  for (absl::string_view f : kPassedFlags) {
    if (opt == f) return true;
  }
  return false;
}

// The key of a passed-through `key=value` FUSE option, or nullopt.
std::optional<absl::string_view> PassedKeyOf(absl::string_view opt) {
  for (const PassedKey& k : kPassedKeys) {
    if (absl::StartsWith(opt, k.key) && opt.size() > k.key.size() && opt[k.key.size()] == '=') {
      return k.key;
    }
  }
  return std::nullopt;
}

// `words` filled into lines of at most 78 columns, each starting with
// `indent`.
std::string Fill(const std::string& indent, const std::vector<std::string>& words) {
  std::string out = indent;
  size_t column = indent.size();
  for (const std::string& w : words) {
    if (column > indent.size() && column + 1 + w.size() > 78) {
      out += "\n" + indent;
      column = indent.size();
    }
    if (column > indent.size()) {
      out += ' ';
      ++column;
    }
    out += w;
    column += w.size();
  }
  return out + "\n";
}

// The part of --help that lists the FUSE and mount(8) options we accept,
// from the tables above. tests/mount/mount_cli_test.cc reads the indented
// lines back (every one of them must mount, and appear in the man page).
std::string MountOptionsHelp() {
  std::vector<std::string> passed(std::begin(kPassedFlags), std::end(kPassedFlags));
  for (const PassedKey& k : kPassedKeys) passed.push_back(absl::StrCat(k.key, "=", k.value));
  std::vector<std::string> ignored(std::begin(kIgnoredWords), std::end(kIgnoredWords));
  for (absl::string_view p : kIgnoredPrefixes) ignored.push_back(absl::StrCat(p, "*"));
  const std::string indent(7, ' ');
  std::string ours;
  for (const MountOption& o : kMountOptions) {
    const std::string key =
        o.value.empty() ? std::string(o.name) : absl::StrCat(o.name, "=", o.value);
    const std::vector<std::string> words = absl::StrSplit(o.help, ' ', absl::SkipEmpty());
    // The option in the left column, its help from column 26 on.
    std::string head = indent + key;
    head += std::string(head.size() < 23 ? 25 - head.size() : 2, ' ');
    const std::string filled = head + Fill(std::string(25, ' '), words).substr(25);
    ours += filled;
  }
  return ours +
         "     FUSE and mount(8) options, passed on to libfuse as they are\n"
         "     (allow_other and allow_root also turn on default_permissions):\n" +
         Fill(indent, passed) + "     fstab and mount(8) words, accepted and ignored:\n" +
         Fill(indent, ignored) +
         "     Any other option, or a value that does not parse, exits 2 with a\n"
         "     message naming it, before anything is read.\n";
}

// The -o options a shell completes, one a line ("cache_mb=", "ro",
// "fsname="): ours, then the FUSE and mount(8) ones passed through (the
// ignored fstab words are not worth offering).
std::string MountOptionNames() {
  std::string out;
  for (const MountOption& o : kMountOptions) {
    absl::StrAppend(&out, o.name, o.value.empty() ? "" : "=", "\n");
  }
  for (absl::string_view f : kPassedFlags) absl::StrAppend(&out, f, "\n");
  for (const PassedKey& k : kPassedKeys) absl::StrAppend(&out, k.key, "=\n");
  return out;
}

// Keys that need a value, ours or libfuse's (`-o fsname` alone is a typo).
bool NeedsValue(absl::string_view key) {
  if (const MountOption* o = FindMountOption(key); o != nullptr) return !o->value.empty();
  for (const PassedKey& k : kPassedKeys) {
    if (key == k.key) return true;
  }
  return false;
}

// Splits -o options into ours and libfuse's. An InvalidArgument error's
// message names the option.
absl::Status TakeMountOptions(absl::string_view list, CliOptions* cli) {
  for (absl::string_view opt : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    const size_t eq = opt.find('=');
    const absl::string_view name = opt.substr(0, eq);
    if (const MountOption* o = FindMountOption(name); o != nullptr) {
      // A flag takes no value; an option with one needs it.
      if (o->value.empty() != (eq == absl::string_view::npos)) {
        return absl::InvalidArgumentError(
            o->value.empty() ? absl::StrCat(name, " takes no value")
                             : absl::StrCat(name, " needs a value (", name, "=...)"));
      }
      if (absl::Status s = o->parse(eq == absl::string_view::npos ? "" : opt.substr(eq + 1), cli);
          !s.ok()) {
        return s;
      }
    } else if (IsIgnoredMountWord(opt)) {
      // fstab/mount(8) words that mean nothing to a FUSE mount.
    } else if (IsPassedFlag(opt)) {
      if (opt == "allow_other" || opt == "allow_root") {
        // Other users must not bypass the mode bits.
        cli->session.fuse_options.push_back("default_permissions");
      }
      cli->session.fuse_options.emplace_back(opt);
    } else if (auto passed = PassedKeyOf(opt)) {
      if (opt.size() == passed->size() + 1)
        return absl::InvalidArgumentError(absl::StrCat(*passed, " needs a value"));
      cli->session.fuse_options.emplace_back(opt);
    } else {
      if (NeedsValue(name)) {
        return absl::InvalidArgumentError(absl::StrCat(name, " needs a value (", name, "=...)"));
      }
      return absl::InvalidArgumentError(absl::StrCat("unknown mount option '", opt, "'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::optional<int> ParseMountCommandLine(int argc, char** argv, CliOptions* cli) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::cout << kUsageOptions << MountOptionsHelp() << kUsageTail;
      return kExitOk;
    }
    if (a == "--list-mount-options") {
      std::cout << MountOptionNames();
      return kExitOk;
    }
    if (a == "-V" || a == "--version") {
      std::cout << "tfrecordfs " << TFRECORDFS_VERSION << "\n";
      return kExitOk;
    }
    if (a == "-f") {
      cli->session.foreground = true;
    } else if (a == "-d" || a == "--debug") {
      cli->session.debug = true;
      cli->session.foreground = true;
    } else if (a == "-s") {
      cli->session.single_threaded = true;
    } else if (a == "-o") {
      if (i + 1 >= argc) return Usage("-o needs an argument");
      if (absl::Status s = TakeMountOptions(argv[++i], cli); !s.ok()) {
        return Usage(std::string(s.message()));
      }
    } else if (absl::StartsWith(a, "-o") && a.size() > 2) {
      if (absl::Status s = TakeMountOptions(a.substr(2), cli); !s.ok()) {
        return Usage(std::string(s.message()));
      }
    } else if (a == "--") {
      for (++i; i < argc; ++i) cli->positional.emplace_back(argv[i]);
    } else if (a.size() > 1 && a[0] == '-') {
      return Usage("unknown option " + a);
    } else {
      cli->positional.push_back(a);
    }
  }
  if (cli->positional.size() < 2) return Usage("need at least one SOURCE and a MOUNTPOINT");
  if ((cli->vfs.view == vfs::ViewKind::kClasses) != !cli->vfs.class_feature.empty()) {
    return Usage(cli->vfs.class_feature.empty() ? "view=classes needs class_feature=NAME"
                                                : "class_feature is for view=classes");
  }
  // The image views take rm and mv (class folders) on a read-write mount;
  // they show no staging folder (vfs::Filesystem).
  // Unless -f, the daemon detaches and changes to "/" before it serves: plain
  // files, the staging store, index_dir and the pack output are opened by
  // path after that, so every path is made absolute now.
  for (std::string& p : cli->positional) {
    if (!objstore::IsObjectUrl(p)) p = AbsolutePath(p);  // a URL stays as it is
  }
  cli->staging_dir = AbsolutePath(cli->staging_dir);
  cli->index_dir = AbsolutePath(cli->index_dir);
  cli->pack.output_dir = AbsolutePath(cli->pack.output_dir);
  cli->log_path = AbsolutePath(cli->log_path);
  cli->objects.gcs_token_file = AbsolutePath(cli->objects.gcs_token_file);
  cli->session.mountpoint = cli->positional.back();
  cli->positional.pop_back();
  cli->vfs.sources = cli->positional;
  return std::nullopt;
}

}  // namespace tfrecordfs::cli
