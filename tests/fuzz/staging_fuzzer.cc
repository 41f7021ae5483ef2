// Fuzz target: the staging parser (staging/record_folder.h), on a real
// directory tree in a private temp dir (/dev/shm when available).
//
// Mode A (first byte even): the input is a program that builds an arbitrary
// record folder: mkdir, create a file with content, set the kind xattr,
// make a symlink (to a file outside the folder), go up. Invariants:
//   * PayloadFromFolder never crashes; it fails only with InvalidArgument
//     or NotFound-style I/O errors, never by following a symlink: a folder
//     holding a symlink under a non-hidden name is refused;
//   * when it succeeds, the payload is a raw record (the folder holds only
//     record.bin, and the payload is its bytes) or an Example that
//     DecodeExample accepts.
// Mode B (first byte odd): a feature table (table_gen.h) is laid out with
// naming::LayoutExample, written to disk as the mount would show it, and
// parsed back: PayloadFromFolder must give the table's shown features, with
// the table's feature types (naming::FeatureTypeOf: kinds and tensor types). Tensors come
// back as EncodeTensor writes them (CanonicalValues); tables whose copy is
// documented as lossy (ArraysRoundTrip) are passed over.
// Mode A's hints and tags include tensor types, so .png/.npy files go
// through the PNG and NPY readers too.
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "fuzz_check.h"
#include "reverse.h"
#include "table_gen.h"
#include "testing/layout_files.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/example/example_list.h"
#include "tfrecordfs/example/sequence.h"
#include "tfrecordfs/naming/feature_type.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/staging/record_folder.h"
#include "tfrecordfs/staging/staged_file.h"

namespace tfrecordfs::fuzz {
namespace {

// Gives every feature name the same type.
class OneTypeForAll final : public naming::FeatureTypes {
 public:
  explicit OneTypeForAll(naming::FeatureType type) : type_(std::move(type)) {}
  naming::FeatureType Lookup(absl::string_view) override { return type_; }

 private:
  naming::FeatureType type_;
};

const std::string& WorkDir() {
  static const std::string dir = [] {
    std::string base = "/dev/shm";
    if (::access(base.c_str(), W_OK) != 0) {
      const char* t = std::getenv("TMPDIR");
      base = t && *t ? t : "/tmp";
    }
    std::string templ = base + "/tfrfs-staging-fuzz-XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) std::abort();
    // An outside file the fuzzer's symlinks point at: it must never be read.
    const std::string secret = templ + "/outside-secret";
    if (!WriteFileAtomically(secret, "SECRET").ok()) std::abort();
    std::atexit([] {
      ::nftw(
          WorkDir().c_str(),
          [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); }, 16,
          FTW_DEPTH | FTW_PHYS);
    });
    return templ;
  }();
  return dir;
}

void RemoveTree(const std::string& path) {
  ::nftw(
      path.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); },
      16, FTW_DEPTH | FTW_PHYS);
}

bool WriteFile(const std::string& path, absl::string_view content) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) return false;
  return WriteFull(fd.get(), content.data(), content.size(), path).ok();
}

// A single path component from fuzz bytes, or "" when it cannot be one.
std::string Component(Bytes& in) {
  static constexpr const char* kWords[] = {
      "record.bin", "0",     "1",     "2",     "0.jpg", "1.bin",   "a",
      "a.txt",      "b.png", "c.npy", "1.png", "x~",    ".hidden", "%2F",
      "%+",         "a%+",   "%-",    "label", "01",    "image",   "3.txt"};
  std::string n;
  if (in.U8() & 1) {
    n = kWords[in.U8() % (sizeof kWords / sizeof *kWords)];
  } else {
    n = std::string(in.Str(30));
  }
  if (n.empty() || n == "." || n == ".." || n.find('/') != std::string::npos ||
      n.find('\0') != std::string::npos) {
    return "";
  }
  return n;
}

void ArbitraryFolder(Bytes& in, const std::string& root) {
  std::vector<std::string> stack = {root};
  bool has_visible_symlink = false;
  std::vector<bool> hidden = {false};  // parallel to stack: inside an ignored name
  const int ops = in.U8() % 24;
  for (int i = 0; i < ops && !in.empty(); ++i) {
    const uint8_t op = in.U8() % 6;
    if (op == 5) {
      if (stack.size() > 1) {
        stack.pop_back();
        hidden.pop_back();
      }
      continue;
    }
    const std::string name = Component(in);
    if (name.empty()) continue;
    const std::string path = stack.back() + "/" + name;
    const bool ignored = hidden.back() || naming::IsIgnoredName(name);
    switch (op) {
      case 0:
        if (::mkdir(path.c_str(), 0755) == 0 && stack.size() < 8) {
          stack.push_back(path);
          hidden.push_back(ignored);
        }
        break;
      case 1:
      case 2:
        WriteFile(path, in.Str(op == 1 ? 40 : 255));
        break;
      case 3: {
        static constexpr const char* kKinds[] = {
            "int64", "float", "bytes", "", "tensor:uint8:2,2,3", "tensor:float:", "tensor:"};
        const char* k = kKinds[in.U8() % 7];
        ::lsetxattr(path.c_str(), staging::kKindXattr, k, std::strlen(k), 0);
        break;
      }
      case 4:
        if (::symlink((WorkDir() + "/outside-secret").c_str(), path.c_str()) == 0 && !ignored) {
          has_visible_symlink = true;
        }
        break;
    }
  }
  const uint8_t type_byte = in.U8();
  naming::FeatureType type{static_cast<example::Kind>(type_byte % 4), {}};
  if (type.kind == example::Kind::kBytes && (type_byte & 4)) {
    type.tensors = {{tensor::DataType::kUint8, {2, 2, 3}}, {tensor::DataType::kFloat, {2}}};
  }
  OneTypeForAll types(std::move(type));
  auto payload = staging::PayloadFromFolder(root, types);
  if (!payload.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(payload.status()) || ErrnoOf(payload.status()) != 0,
               payload.status().ToString());
    return;
  }
  FUZZ_CHECK(!has_visible_symlink, "a symlink was followed");
  struct stat st;
  const bool raw = ::lstat((root + "/record.bin").c_str(), &st) == 0 && S_ISREG(st.st_mode);
  // A top-level feature_lists/ folder makes a SequenceExample
  // (staging/record_folder.h), which must then parse as one.
  const std::string lists = root + "/" + std::string(naming::kFeatureListsDir);
  if (!raw && ::lstat(lists.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    auto seq = example::DecodeSequenceExample(*payload);
    FUZZ_CHECK(seq.ok(),
               "staged folder with feature_lists/ packs to a payload that is not a "
               "SequenceExample: ",
               seq.status().message());
    return;
  }
  // A top-level examples/ folder makes an ExampleListWithContext.
  const std::string examples = root + "/" + std::string(naming::kExamplesDir);
  if (!raw && ::lstat(examples.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    auto list = example::DecodeExampleList(*payload);
    FUZZ_CHECK(list.ok(),
               "staged folder with examples/ packs to a payload that is not an "
               "ExampleListWithContext: ",
               list.status().message());
    return;
  }
  auto t = example::DecodeExample(*payload);
  if (!t.ok()) {
    FUZZ_CHECK(raw,
               "staged folder packs to a payload that is not an Example: ", t.status().message());
    auto bytes = ReadFileToString(root + "/record.bin");
    FUZZ_CHECK(bytes.ok() && *bytes == *payload, "raw payload differs from record.bin");
  }
}

void RoundTrip(Bytes& in, const std::string& root) {
  GenTable gen = GenFeatures(in);
  // Kindless features only, named with control bytes: not an Example (the
  // decoder takes it for another message), so never shown as a folder.
  if (!example::DecodeExample(example::EncodeExample(gen.table)).ok()) return;
  const naming::Layout l = naming::LayoutExample(gen.table, gen.payload);
  const absl::Status servable = naming::CheckLayout(l);
  FUZZ_CHECK(servable.ok(), servable.message());
  std::vector<size_t> depth_bytes(l.entries.size(), 0);  // path length below root
  for (uint32_t i = 1; i < l.entries.size(); ++i) {
    const naming::Entry& e = l.entries[i];
    // Names the naming target reports; here they would only fail mkdir.
    if (e.name.empty() || e.name.size() > naming::kMaxNameBytes) return;
    depth_bytes[i] = depth_bytes[e.parent] + 1 + e.name.size();
    // A feature name thousands of bytes long nests chunk directories past
    // PATH_MAX: the mount serves it (lookups are per component), but no
    // path-based tool, this one or the staging parser, can write it back.
    if (root.size() + depth_bytes[i] >= 4000) return;
  }
  const absl::Status written = test::WriteLayout(l, 0, root, gen.payload);
  FUZZ_CHECK(written.ok(), "writing the layout: ", absl::CEscape(written.message()));
  naming::FeatureTypeMap types = TypesOf(gen.table);
  if (!ArraysRoundTrip(gen.table)) return;  // documented as lossy
  auto payload = staging::PayloadFromFolder(root, types);
  FUZZ_CHECK(payload.ok(), payload.status().ToString());
  auto t = example::DecodeExample(*payload);
  FUZZ_CHECK(t.ok(), t.status().ToString());
  CanonTable got;
  for (const auto& f : t->features) got[f.name] = ToCanon(f);
  got = CanonicalValues(std::move(got));
  const CanonTable want = CanonicalValues(FromTable(gen.table));
  FUZZ_CHECK(got == want, "staged copy gives ", Describe(got), " want ", Describe(want));
}

}  // namespace
}  // namespace tfrecordfs::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tfrecordfs::fuzz;
  if (size > (1u << 16)) return 0;
  const std::string root = WorkDir() + "/record";
  RemoveTree(root);
  if (::mkdir(root.c_str(), 0755) != 0) std::abort();
  Bytes in(data, size);
  if (in.U8() & 1) {
    RoundTrip(in, root);
  } else {
    ArbitraryFolder(in, root);
  }
  RemoveTree(root);
  return 0;
}
