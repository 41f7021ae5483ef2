#include "tfrecordfs/objstore/xml.h"

#include <expat.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tfrecordfs::objstore {
namespace {

void XMLCALL OnStart(void* user, const XML_Char* name, const XML_Char**) {
  static_cast<XmlHandler*>(user)->Start(name);
}
void XMLCALL OnText(void* user, const XML_Char* s, int len) {
  static_cast<XmlHandler*>(user)->Text(absl::string_view(s, static_cast<size_t>(len)));
}
void XMLCALL OnEnd(void* user, const XML_Char* name) { static_cast<XmlHandler*>(user)->End(name); }

// The first element named `want` (FindXmlElement).
class FirstElement final : public XmlHandler {
 public:
  explicit FirstElement(absl::string_view want) : want_(want) {}
  void Start(absl::string_view name) override {
    if (depth_++ == 0) element_.root = std::string(name);
    if (!element_.found && name == want_) in_want_ = true;
  }
  void Text(absl::string_view text) override {
    if (in_want_ && element_.text.size() < XmlElement::kMaxText) {
      element_.text.append(text.data(), text.size());
    }
  }
  void End(absl::string_view name) override {
    --depth_;
    if (in_want_ && name == want_) {
      in_want_ = false;
      element_.found = true;
    }
  }
  XmlElement Take() { return std::move(element_); }

 private:
  const absl::string_view want_;
  XmlElement element_;
  bool in_want_ = false;
  int depth_ = 0;
};

}  // namespace

absl::Status ParseXml(absl::string_view xml, XmlHandler& handler) {
  XML_Parser parser = XML_ParserCreate(nullptr);
  if (parser == nullptr) return absl::ResourceExhaustedError("XML_ParserCreate failed");
  XML_SetUserData(parser, &handler);
  XML_SetElementHandler(parser, OnStart, OnEnd);
  XML_SetCharacterDataHandler(parser, OnText);
  const bool ok = XML_Parse(parser, xml.data(), static_cast<int>(xml.size()), 1) == XML_STATUS_OK;
  std::string why;
  if (!ok) {
    why = absl::StrCat("line ", XML_GetCurrentLineNumber(parser), ": ",
                       XML_ErrorString(XML_GetErrorCode(parser)));
  }
  XML_ParserFree(parser);
  if (!ok) return absl::DataLossError(why);
  return absl::OkStatus();
}

absl::StatusOr<XmlElement> FindXmlElement(absl::string_view xml, absl::string_view want) {
  FirstElement first(want);
  if (absl::Status s = ParseXml(xml, first); !s.ok()) return s;
  return first.Take();
}

}  // namespace tfrecordfs::objstore
