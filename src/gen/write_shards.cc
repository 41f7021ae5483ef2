#include "write_shards.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/record/writer.h"
#include "tfrecordfs/repack/pack.h"

namespace tfrecordfs::gen {

absl::Status WriteShards(const std::string& dir, const std::string& prefix, uint64_t records,
                         uint64_t shards, const Storage& storage,
                         const std::function<std::string(uint64_t)>& make_payload) {
  ::mkdir(dir.c_str(), 0755);
  uint64_t next = 0;
  for (uint64_t s = 0; s < shards; ++s) {
    const uint64_t count = records / shards + (s < records % shards ? 1 : 0);
    // The pack's names: the suffix says the codec (.tfrecord.gz, .tfrecord.zlib).
    const std::string path =
        absl::StrCat(dir, "/", repack::ShardName(prefix, s, shards, storage.codec));
    auto fd = OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!fd.ok()) return fd.status();
    // Each member gets its own writer on a dup of the descriptor: they share
    // the file offset, so the members follow each other.
    const uint64_t members = std::max<uint64_t>(1, storage.members);
    for (uint64_t m = 0; m < members; ++m) {
      const uint64_t in_member = count / members + (m < count % members ? 1 : 0);
      UniqueFd member_fd(::dup(fd->get()));
      if (member_fd.get() < 0) return ErrnoError(errno, absl::StrCat("dup ", path));
      record::ShardWriter w(std::move(member_fd), path, {.codec = storage.codec});
      for (uint64_t i = 0; i < in_member; ++i) {
        if (auto st = w.Append(make_payload(next++)); !st.ok()) return st;
      }
      if (auto st = w.Close(false); !st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

}  // namespace tfrecordfs::gen
