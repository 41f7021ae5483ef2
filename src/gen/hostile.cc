// hostile: writes the hostile corpus, a shard of tiny records and
// MANIFEST.txt (commands.h).
#include <fcntl.h>
#include <sys/stat.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "commands.h"
#include "hostile_corpus.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/record/writer.h"

namespace tfrecordfs::gen {

int Hostile(const std::string& dir, uint64_t tiny_records) {
  ::mkdir(dir.c_str(), 0755);
  const HostileCorpus c = BuildHostileCorpus();
  std::string manifest =
      "# tfrecordfs-gen hostile: what each file really holds (tab-separated).\n"
      "# shard NAME RECORDS | record NAME INDEX ok|damaged example|raw OFFSET SIZE CRC32C |\n"
      "# plain NAME SIZE | tiny NAME RECORDS (record k is Example{i: int64[k]})\n";
  for (const HostileShard& s : c.shards) {
    if (auto st = WriteFileAtomically(absl::StrCat(dir, "/", s.name), s.bytes); !st.ok())
      return Fail(st);
    absl::StrAppend(&manifest, "shard\t", s.name, "\t", s.records.size(), "\n");
    for (size_t i = 0; i < s.records.size(); ++i) {
      const HostileRecord& r = s.records[i];
      absl::StrAppendFormat(&manifest, "record\t%s\t%d\t%s\t%s\t%d\t%d\t%08x\n", s.name, i,
                            r.intact ? "ok" : "damaged", r.example ? "example" : "raw", r.offset,
                            r.payload.size(), crc32c::Value(r.payload));
    }
  }
  for (const auto& [name, bytes] : c.plain_files) {
    if (auto st = WriteFileAtomically(absl::StrCat(dir, "/", name), bytes); !st.ok())
      return Fail(st);
    absl::StrAppend(&manifest, "plain\t", name, "\t", bytes.size(), "\n");
  }
  if (tiny_records > 0) {
    const std::string path = dir + "/tiny-records.tfrecord";
    auto fd = OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!fd.ok()) return Fail(fd.status());
    record::ShardWriter w(std::move(*fd), path);
    absl::Status st;
    for (uint64_t k = 0; k < tiny_records && st.ok(); ++k) st = w.Append(TinyPayload(k));
    if (st.ok()) st = w.Close(false);
    if (!st.ok()) return Fail(st);
    absl::StrAppend(&manifest, "tiny\ttiny-records.tfrecord\t", tiny_records, "\n");
  }
  if (auto st = WriteFileAtomically(dir + "/MANIFEST.txt", manifest); !st.ok()) return Fail(st);
  return 0;
}

}  // namespace tfrecordfs::gen
