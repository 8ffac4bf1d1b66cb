// multipart/form-data parsing (server/http/multipart_form.h): what clients send (httpx's and curl's framing), and
// every malformed or oversized form refused with an error naming what is wrong.
#include "server/http/multipart_form.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

// A body framed as httpx (the openai client's transport) frames it.
std::string Form(const std::string& boundary, const std::vector<std::string>& parts) {
  std::string body;
  for (const std::string& part : parts) body += "--" + boundary + "\r\n" + part + "\r\n";
  return body + "--" + boundary + "--\r\n";
}

absl::StatusOr<MultipartForm> Parse(const std::string& body, const std::string& boundary = "b0undary",
                                    const MultipartLimits& limits = {}) {
  return ParseMultipartForm(body, boundary, limits);
}

TEST(MultipartBoundaryTest, TakesATokenOrQuotedBoundaryWhateverTheCase) {
  EXPECT_EQ(*MultipartBoundary("multipart/form-data; boundary=abc123"), "abc123");
  EXPECT_EQ(*MultipartBoundary("Multipart/Form-Data;BOUNDARY=\"a b:c\""), "a b:c");
  EXPECT_EQ(*MultipartBoundary("multipart/form-data; charset=utf-8; boundary=x-y_z; "), "x-y_z");
}

TEST(MultipartBoundaryTest, RefusesOtherTypesAndBadBoundariesByName) {
  EXPECT_THAT(MultipartBoundary("application/json").status().message(), HasSubstr("expected multipart/form-data"));
  EXPECT_THAT(MultipartBoundary("multipart/form-data").status().message(), HasSubstr("without a boundary"));
  EXPECT_THAT(MultipartBoundary("multipart/form-data; charset=utf-8").status().message(),
              HasSubstr("without a boundary"));
  EXPECT_THAT(MultipartBoundary("multipart/form-data; boundary=\"\"").status().message(), HasSubstr("1 to 70"));
  EXPECT_THAT(MultipartBoundary("multipart/form-data; boundary=" + std::string(71, 'a')).status().message(),
              HasSubstr("not 71"));
  EXPECT_THAT(MultipartBoundary("multipart/form-data; boundary=\"a\x01\"").status().message(),
              HasSubstr("RFC 2046"));
  EXPECT_THAT(MultipartBoundary("multipart/form-data; boundary=\"ab \"").status().message(),
              HasSubstr("end with a space"));
  EXPECT_THAT(MultipartBoundary("multipart/form-data; boundary=a; boundary=b").status().message(),
              HasSubstr("more than one boundary"));
  EXPECT_THAT(MultipartBoundary("multipart/form-data; boundary=\"abc").status().message(),
              HasSubstr("unterminated quoted string"));
  EXPECT_THAT(MultipartBoundary("multipart/form-data; boundary").status().message(), HasSubstr("has no value"));
}

TEST(MultipartFormTest, ParsesFieldsAndAFileWithItsBytesExactly) {
  const std::string audio("RIFF\0\0\r\n--b0undar\r\nbytes", 25);  // binary, CRLFs and a near-boundary inside
  const std::string body =
      "preamble is ignored\r\n" +
      Form("b0undary", {"Content-Disposition: form-data; name=\"model\"\r\n\r\nasr_digits",
                        "Content-Disposition: form-data; name=\"file\"; filename=\"clip.wav\"\r\n"
                        "Content-Type: audio/wav\r\n\r\n" + audio,
                        "content-disposition: FORM-DATA; name=empty\r\n\r\n"}) +
      "epilogue is ignored";
  absl::StatusOr<MultipartForm> form = Parse(body);
  ASSERT_TRUE(form.ok()) << form.status();
  ASSERT_EQ(form->parts.size(), 3u);
  EXPECT_EQ(form->parts[0].name, "model");
  EXPECT_EQ(form->parts[0].data, "asr_digits");
  EXPECT_FALSE(form->parts[0].filename.has_value());
  EXPECT_EQ(form->parts[0].content_type, "");
  EXPECT_EQ(form->parts[1].name, "file");
  EXPECT_EQ(form->parts[1].filename, "clip.wav");
  EXPECT_EQ(form->parts[1].content_type, "audio/wav");
  EXPECT_EQ(form->parts[1].data, audio);
  EXPECT_EQ(form->parts[2].name, "empty");
  EXPECT_EQ(form->parts[2].data, "");
}

TEST(MultipartFormTest, QuotedNamesUnescapeAndTransportPaddingIsAllowed) {
  const std::string body = "--b0undary  \r\nContent-Disposition: form-data; name=\"a\\\"b\"; filename=\"\"\r\n\r\nx"
                           "\r\n--b0undary--";
  absl::StatusOr<MultipartForm> form = Parse(body);
  ASSERT_TRUE(form.ok()) << form.status();
  ASSERT_EQ(form->parts.size(), 1u);
  EXPECT_EQ(form->parts[0].name, "a\"b");
  EXPECT_EQ(form->parts[0].filename, "");
  EXPECT_EQ(form->parts[0].data, "x");
}

TEST(MultipartFormTest, AnEmptyFormHasNoParts) {
  absl::StatusOr<MultipartForm> form = Parse("--b0undary--\r\n");
  ASSERT_TRUE(form.ok()) << form.status();
  EXPECT_TRUE(form->parts.empty());
}

TEST(MultipartFormTest, RefusesMalformedBodiesNamingTheProblem) {
  const std::string field = "Content-Disposition: form-data; name=\"model\"\r\n\r\nx";
  struct Case {
    std::string body;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"", "does not occur in the body"},
      {"--other\r\n" + field + "\r\n--other--", "does not occur in the body"},
      {"--b0undary\r\n" + field, "before the part's closing boundary"},
      {"--b0undary\r\n" + field + "\r\n--b0undary", "without the closing boundary"},
      {"--b0undary\r\n" + field + "\r\n--b0undaryX\r\n", "followed by other text"},
      {"--b0undary\r\nContent-Disposition: form-data; name=\"m\"", "ends inside the part's headers"},
      {Form("b0undary", {"Content-Type: text/plain\r\n\r\nx"}), "no Content-Disposition"},
      {Form("b0undary", {"Content-Disposition: attachment; name=\"m\"\r\n\r\nx"}), "must be form-data"},
      {Form("b0undary", {"Content-Disposition: form-data; filename=\"a\"\r\n\r\nx"}), "no name parameter"},
      {Form("b0undary", {"Content-Disposition: form-data; name=\"a\r\n\r\nx"}), "unterminated quoted string"},
      {Form("b0undary", {"Content-Disposition: form-data; name=a\r\nContent-Disposition: form-data; name=b\r\n\r\nx"}),
       "more than one Content-Disposition"},
      {Form("b0undary", {"Content-Disposition: form-data; name=a\r\n folded\r\n\r\nx"}), "folded"},
      {Form("b0undary", {"Content-Disposition: form-data; name=a\r\nno colon\r\n\r\nx"}), "no field name"},
      {Form("b0undary", {"Content-Disposition: form-data; name=a\r\nContent-Type: multipart/mixed\r\n\r\nx"}),
       "nested multipart"},
      {Form("b0undary", {"Content-Disposition: form-data; name=a\r\nContent-Transfer-Encoding: base64\r\n\r\nx"}),
       "Content-Transfer-Encoding 'base64'"},
      {Form("b0undary", {std::string("Content-Disposition: form-data; name=a\0b\r\n\r\nx", 45)}), "NUL"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<MultipartForm> form = Parse(c.body);
    ASSERT_FALSE(form.ok()) << c.body;
    EXPECT_TRUE(absl::IsInvalidArgument(form.status())) << form.status();
    EXPECT_THAT(form.status().message(), HasSubstr(c.message)) << c.body;
  }
}

TEST(MultipartFormTest, BoundsPartsHeaderBytesAndHeaderLines) {
  const std::string field = "Content-Disposition: form-data; name=\"f\"\r\n\r\nx";
  MultipartLimits limits;
  limits.max_parts = 3;
  EXPECT_TRUE(Parse(Form("b0undary", {field, field, field}), "b0undary", limits).ok());
  EXPECT_THAT(Parse(Form("b0undary", {field, field, field, field}), "b0undary", limits).status().message(),
              HasSubstr("more than 3 parts"));

  limits = {};
  limits.max_part_header_bytes = 64;
  const std::string long_header = "Content-Disposition: form-data; name=\"" + std::string(100, 'n') + "\"\r\n\r\nx";
  EXPECT_THAT(Parse(Form("b0undary", {long_header}), "b0undary", limits).status().message(),
              HasSubstr("longer than 64 bytes"));

  limits = {};
  limits.max_part_header_lines = 2;
  const std::string many_lines = "Content-Disposition: form-data; name=a\r\nX-A: 1\r\nX-B: 2\r\n\r\nx";
  EXPECT_THAT(Parse(Form("b0undary", {many_lines}), "b0undary", limits).status().message(),
              HasSubstr("more than 2 header lines"));
}

TEST(MultipartFormTest, EveryPrefixOfAValidBodyIsRefusedOrParsedWithoutReadingPastIt) {
  // Truncations are what a cut connection or a hostile client sends; the views must stay inside the buffer (ASan
  // builds check it).
  const std::string body = Form("b0undary", {"Content-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n"
                                             "Content-Type: audio/wav\r\n\r\nRIFFdata",
                                             "Content-Disposition: form-data; name=model\r\n\r\nm"});
  for (size_t n = 0; n < body.size(); ++n) {
    const std::string prefix = body.substr(0, n);
    absl::StatusOr<MultipartForm> form = Parse(prefix);
    if (!form.ok()) continue;
    for (const MultipartPart& part : form->parts) {
      EXPECT_GE(part.data.data(), prefix.data());
      EXPECT_LE(part.data.data() + part.data.size(), prefix.data() + prefix.size());
    }
  }
  EXPECT_TRUE(Parse(body).ok());
}

}  // namespace
}  // namespace sluice
