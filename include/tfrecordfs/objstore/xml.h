// The XML that S3 and Cloud Storage's XML API answer with (ListObjectsV2
// pages, CreateMultipartUpload and CompleteMultipartUpload results), read
// with expat: the one place object storage sets up an XML parser.
//
// ParseXml walks a whole document and calls an XmlHandler for each
// element's start and end and for its character data (in as many pieces as
// expat gives it). Names are passed as expat gives them (namespace
// processing off: a prefixed name is "ns:Name"). The document is parsed in
// memory, as received: its size is bounded by the request that fetched it
// (HttpClient::Send's max_body).
//
// FindXmlElement answers the small replies: the root element's name and
// the text of the first element of a given name.
//
// Thread-safety: pure functions (a parser per call).
#ifndef TFRECORDFS_OBJSTORE_XML_H_
#define TFRECORDFS_OBJSTORE_XML_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tfrecordfs::objstore {

class XmlHandler {
 public:
  virtual ~XmlHandler() = default;
  virtual void Start(absl::string_view name) = 0;
  // A piece of the current element's character data.
  virtual void Text(absl::string_view text) = 0;
  virtual void End(absl::string_view name) = 0;
};

// Parses `xml` whole, calling `handler`. Errors: DataLoss "line N: <expat's
// reason>" for a document that is not well-formed XML (the handler may have
// been called for what came before), ResourceExhausted when no parser can
// be made.
absl::Status ParseXml(absl::string_view xml, XmlHandler& handler);

// The first element named `want`, wherever it is in the document.
struct XmlElement {
  std::string root;  // the root element's name
  bool found = false;
  // Its text (of the element and those inside it), at most kMaxText bytes.
  std::string text;
  static constexpr size_t kMaxText = 4096;
};
// Errors: as ParseXml.
absl::StatusOr<XmlElement> FindXmlElement(absl::string_view xml, absl::string_view want);

}  // namespace tfrecordfs::objstore

#endif  // TFRECORDFS_OBJSTORE_XML_H_
