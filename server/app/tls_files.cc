#include "server/app/tls_files.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

struct BioCloser {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Closer {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct KeyCloser {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};

std::string OpenSslReason() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no PEM data found";
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

}  // namespace

absl::Status CheckTlsFiles(const std::string& cert_path, const std::string& key_path) {
  ERR_clear_error();
  std::unique_ptr<BIO, BioCloser> cert_file(BIO_new_file(cert_path.c_str(), "r"));
  if (!cert_file) return absl::InvalidArgumentError(absl::StrCat("tls cert ", cert_path, ": cannot be read"));
  std::unique_ptr<X509, X509Closer> cert(PEM_read_bio_X509(cert_file.get(), nullptr, nullptr, nullptr));
  if (!cert) {
    return absl::InvalidArgumentError(
        absl::StrCat("tls cert ", cert_path, ": not a PEM certificate (", OpenSslReason(), ")"));
  }
  std::unique_ptr<BIO, BioCloser> key_file(BIO_new_file(key_path.c_str(), "r"));
  if (!key_file) return absl::InvalidArgumentError(absl::StrCat("tls key ", key_path, ": cannot be read"));
  std::unique_ptr<EVP_PKEY, KeyCloser> key(PEM_read_bio_PrivateKey(key_file.get(), nullptr, nullptr, nullptr));
  if (!key) {
    return absl::InvalidArgumentError(
        absl::StrCat("tls key ", key_path, ": not a PEM private key (", OpenSslReason(), ")"));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("tls key ", key_path, " does not match the certificate in ", cert_path));
  }
  return absl::OkStatus();
}

}  // namespace sluice
