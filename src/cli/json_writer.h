// A small streaming JSON writer for the commands' --json output (RFC 8259).
//
// Strings are escaped as JSON requires ('"', '\\' and every byte below 0x20;
// DEL and U+2028/U+2029 too, so the output is also safe JavaScript). JSON
// strings are Unicode: a byte that is not part of valid UTF-8 (a file name
// can hold one) is written as U+FFFD. Bytes that must survive exactly are
// the caller's to encode (Base64()).
//
// The writer puts the commas and colons; it does not check that the calls
// form a valid document (a test does). Not thread-safe.
#ifndef TFRECORDFS_CLI_JSON_WRITER_H_
#define TFRECORDFS_CLI_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace tfrecordfs::cli {

// `s` as a quoted JSON string.
std::string JsonQuote(absl::string_view s);

// RFC 4648 base64 with padding.
std::string Base64(absl::string_view bytes);

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(absl::string_view key);
  JsonWriter& String(absl::string_view s);
  JsonWriter& Int(int64_t v);
  JsonWriter& Uint(uint64_t v);
  // A number already formatted as JSON (e.g. a float's shortest decimal).
  JsonWriter& Number(absl::string_view formatted);
  JsonWriter& Bool(bool v);
  JsonWriter& Null();

  // The document so far, with a final newline once it is complete.
  const std::string& str() const { return out_; }

 private:
  void BeforeValue();
  // Begins / ends a container with `bracket`.
  JsonWriter& Open(char bracket);
  JsonWriter& Close(char bracket);

  std::string out_;
  // One entry per open container: true once it holds a value.
  std::vector<bool> has_value_;
  bool after_key_ = false;
};

}  // namespace tfrecordfs::cli

#endif  // TFRECORDFS_CLI_JSON_WRITER_H_
