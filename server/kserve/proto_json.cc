#include "server/kserve/proto_json.h"

#include <algorithm>
#include <utility>
#include <vector>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <google/protobuf/descriptor.h>

namespace sluice {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void WriteMessage(Writer& w, const Message& message);

void WriteString(Writer& w, const std::string& text) {
  w.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
}

// One value of `field`: element `index` of a repeated field, or the singular value when index < 0.
void WriteValue(Writer& w, const Message& message, const FieldDescriptor* field, int index) {
  const Reflection* r = message.GetReflection();
  const bool repeated = index >= 0;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      w.Int(repeated ? r->GetRepeatedInt32(message, field, index) : r->GetInt32(message, field));
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      w.Int64(repeated ? r->GetRepeatedInt64(message, field, index) : r->GetInt64(message, field));
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      w.Uint(repeated ? r->GetRepeatedUInt32(message, field, index) : r->GetUInt32(message, field));
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      w.Uint64(repeated ? r->GetRepeatedUInt64(message, field, index) : r->GetUInt64(message, field));
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      w.Double(repeated ? r->GetRepeatedDouble(message, field, index) : r->GetDouble(message, field));
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      w.Double(repeated ? r->GetRepeatedFloat(message, field, index) : r->GetFloat(message, field));
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      w.Bool(repeated ? r->GetRepeatedBool(message, field, index) : r->GetBool(message, field));
      break;
    case FieldDescriptor::CPPTYPE_ENUM:
      WriteString(w, (repeated ? r->GetRepeatedEnum(message, field, index) : r->GetEnum(message, field))->name());
      break;
    case FieldDescriptor::CPPTYPE_STRING:
      WriteString(w, repeated ? r->GetRepeatedString(message, field, index) : r->GetString(message, field));
      break;
    case FieldDescriptor::CPPTYPE_MESSAGE:
      WriteMessage(w, repeated ? r->GetRepeatedMessage(message, field, index) : r->GetMessage(message, field));
      break;
  }
}

// A map field is a repeated entry message {key = 1, value = 2}; keys are strings in the messages served here.
// Entries are written sorted by key: a protobuf map has no order, and answers should not change between calls.
void WriteMap(Writer& w, const Message& message, const FieldDescriptor* field) {
  const Reflection* r = message.GetReflection();
  std::vector<std::pair<std::string, const Message*>> entries;
  for (int i = 0; i < r->FieldSize(message, field); ++i) {
    const Message& entry = r->GetRepeatedMessage(message, field, i);
    entries.emplace_back(entry.GetReflection()->GetString(entry, entry.GetDescriptor()->map_key()), &entry);
  }
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  w.StartObject();
  for (const auto& [key, entry] : entries) {
    WriteString(w, key);
    WriteValue(w, *entry, entry->GetDescriptor()->map_value(), -1);
  }
  w.EndObject();
}

void WriteMessage(Writer& w, const Message& message) {
  const google::protobuf::Descriptor* descriptor = message.GetDescriptor();
  const Reflection* r = message.GetReflection();
  w.StartObject();
  for (int f = 0; f < descriptor->field_count(); ++f) {
    const FieldDescriptor* field = descriptor->field(f);
    const bool in_oneof = field->containing_oneof() != nullptr;
    const bool singular_message = !field->is_repeated() && field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
    if ((in_oneof || singular_message) && !r->HasField(message, field)) continue;
    WriteString(w, field->name());
    if (field->is_map()) {
      WriteMap(w, message, field);
    } else if (field->is_repeated()) {
      w.StartArray();
      for (int i = 0; i < r->FieldSize(message, field); ++i) WriteValue(w, message, field, i);
      w.EndArray();
    } else {
      WriteValue(w, message, field, -1);
    }
  }
  w.EndObject();
}

}  // namespace

std::string ProtoToKserveJson(const Message& message) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  WriteMessage(w, message);
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace sluice
