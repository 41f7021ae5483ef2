#include "testing/ops.h"

#include <cstddef>
#include <cstring>

#include "gtest/gtest.h"
#include "tfrecordfs/base/file.h"

namespace tfrecordfs::test {

std::string FakeJpeg(size_t n, int seed) {
  std::string s("\xff\xd8\xff\xe0", 4);
  for (size_t i = 0; s.size() < n; ++i) s.push_back(static_cast<char>((i * 131 + seed * 7) & 0xff));
  return s;
}

std::vector<Dirent> ParseDirents(const std::string& buf, bool plus) {
  std::vector<Dirent> out;
  size_t pos = 0;
  while (pos < buf.size()) {
    Dirent d;
    const fuse_dirent* de;
    size_t rec;
    if (plus) {
      EXPECT_LE(pos + FUSE_NAME_OFFSET_DIRENTPLUS, buf.size());
      fuse_direntplus dp;
      std::memcpy(&dp, buf.data() + pos, sizeof dp);
      d.nodeid = dp.entry_out.nodeid;
      d.attr = dp.entry_out.attr;
      de = reinterpret_cast<const fuse_dirent*>(buf.data() + pos +
                                                offsetof(fuse_direntplus, dirent));
      rec = FUSE_DIRENTPLUS_SIZE(reinterpret_cast<const fuse_direntplus*>(buf.data() + pos));
    } else {
      EXPECT_LE(pos + FUSE_NAME_OFFSET, buf.size());
      de = reinterpret_cast<const fuse_dirent*>(buf.data() + pos);
      rec = FUSE_DIRENT_SIZE(de);
    }
    fuse_dirent head;
    std::memcpy(&head, de, sizeof head);
    d.ino = head.ino;
    d.off = head.off;
    d.type = head.type;
    d.name.assign(reinterpret_cast<const char*>(de) + FUSE_NAME_OFFSET, head.namelen);
    EXPECT_EQ(0u, rec % 8) << "records are 8-byte aligned";
    EXPECT_LE(pos + rec, buf.size()) << "record overruns the buffer";
    if (rec == 0 || pos + rec > buf.size()) break;
    out.push_back(std::move(d));
    pos += rec;
  }
  return out;
}

std::vector<std::string> Names(const std::vector<Dirent>& ds) {
  std::vector<std::string> out;
  for (const Dirent& d : ds) out.push_back(d.name);
  return out;
}

std::string ReadAll(const fuse::ReadReply& r) {
  std::string out;
  auto one = [&](const vfs::ReadBuffer& b) {
    if (b.fd < 0) {
      out += b.data;
      return;
    }
    std::string part(b.length, '\0');
    auto got = PreadUpTo(b.fd, part.data(), part.size(), b.offset, "reply fd");
    EXPECT_TRUE(got.ok()) << got.status();
    if (got.ok()) part.resize(*got);
    EXPECT_EQ(b.length, part.size()) << "the fd range runs past the end of its file";
    out += part;
  };
  one(r.data);
  for (const vfs::ReadBuffer& b : r.data.more) one(b);
  return out;
}

fuse_entry_param LookupPath(const fuse::Ops& ops, absl::string_view path) {
  fuse_ino_t ino = FUSE_ROOT_ID;
  fuse_entry_param last{};
  last.ino = FUSE_ROOT_ID;
  size_t start = 0;
  while (start < path.size()) {
    size_t slash = path.find('/', start);
    if (slash == absl::string_view::npos) slash = path.size();
    fuse::EntryReply r = fuse::DoLookup(ops, ino, path.substr(start, slash - start));
    EXPECT_EQ(0, r.err) << path << ": " << std::strerror(r.err);
    EXPECT_NE(0u, r.entry.ino) << path << ": not found";
    if (r.err || r.entry.ino == 0) return fuse_entry_param{};
    last = r.entry;
    ino = r.entry.ino;
    start = slash + 1;
  }
  return last;
}

}  // namespace tfrecordfs::test
