#include "backend/nrt/safetensors_file.h"

#include <rapidjson/document.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

// A header longer than this is not a weights index but a corrupt or hostile file.
constexpr uint64_t kMaxHeaderBytes = 100 << 20;

}  // namespace

size_t SafetensorsDtypeSize(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL") return 1;
  return 0;
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  auto bad = [&](const std::string& why) { return absl::InvalidArgumentError(absl::StrCat(path, ": ", why)); };
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open weights file ", path));
  std::error_code ec;
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec) return bad(ec.message());
  unsigned char length_bytes[8];
  if (!in.read(reinterpret_cast<char*>(length_bytes), 8)) return bad("shorter than the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | length_bytes[i];
  if (header_len > kMaxHeaderBytes || header_len > file_size - 8) {
    return bad(absl::StrCat("header length ", header_len, " does not fit the file (", file_size, " bytes)"));
  }
  std::string header(header_len, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(header_len))) return bad("truncated header");
  rapidjson::Document doc;
  doc.Parse(header.data(), header.size());
  if (doc.HasParseError() || !doc.IsObject()) return bad("header is not a JSON object");
  const uint64_t data_start = 8 + header_len;
  SafetensorsFile file;
  file.path_ = path;
  const rapidjson::Value& index = doc;  // const iterators: clang's C++20 mode finds rapidjson's mutable ones ambiguous
  for (auto member = index.MemberBegin(); member != index.MemberEnd(); ++member) {
    const std::string name = member->name.GetString();
    if (name == "__metadata__") continue;
    auto bad_tensor = [&](const std::string& why) { return bad(absl::StrCat("tensor '", name, "': ", why)); };
    const rapidjson::Value& v = member->value;
    if (!v.IsObject() || !v.HasMember("dtype") || !v["dtype"].IsString() || !v.HasMember("shape") ||
        !v["shape"].IsArray() || !v.HasMember("data_offsets") || !v["data_offsets"].IsArray() ||
        v["data_offsets"].Size() != 2) {
      return bad_tensor("needs dtype (string), shape (array) and data_offsets ([begin, end])");
    }
    SafetensorsEntry entry;
    entry.dtype = v["dtype"].GetString();
    uint64_t elements = 1;
    for (const auto& d : v["shape"].GetArray()) {
      if (!d.IsUint64()) return bad_tensor("shape entries must be non-negative integers");
      entry.shape.push_back(static_cast<int64_t>(d.GetUint64()));
      elements *= d.GetUint64();
    }
    const auto& offsets = v["data_offsets"];
    if (!offsets[0].IsUint64() || !offsets[1].IsUint64() || offsets[0].GetUint64() > offsets[1].GetUint64()) {
      return bad_tensor("data_offsets must be [begin, end] with begin <= end");
    }
    entry.begin = data_start + offsets[0].GetUint64();
    entry.end = data_start + offsets[1].GetUint64();
    if (entry.end > file_size) return bad_tensor(absl::StrCat("data ends at byte ", entry.end, ", past the file"));
    const size_t element_size = SafetensorsDtypeSize(entry.dtype);
    if (element_size != 0 && entry.size() != elements * element_size) {
      return bad_tensor(absl::StrCat(entry.size(), " bytes, but ", elements, " ", entry.dtype, " elements need ",
                                     elements * element_size));
    }
    file.tensors_.emplace(name, std::move(entry));
  }
  return file;
}

absl::StatusOr<const SafetensorsEntry*> SafetensorsFile::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return absl::NotFoundError(absl::StrCat(path_, " has no tensor '", name, "'"));
  return &it->second;
}

absl::StatusOr<std::vector<std::byte>> SafetensorsFile::ReadTensor(const std::string& name) const {
  absl::StatusOr<const SafetensorsEntry*> entry = Find(name);
  if (!entry.ok()) return entry.status();
  std::ifstream in(path_, std::ios::binary);
  std::vector<std::byte> bytes((*entry)->size());
  in.seekg(static_cast<std::streamoff>((*entry)->begin));
  if (!in || !in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()))) {
    return absl::DataLossError(absl::StrCat(path_, ": cannot read tensor '", name, "'"));
  }
  return bytes;
}

}  // namespace sluice
