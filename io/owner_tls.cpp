#include "io/owner_tls.hpp"

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>

#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "io/state_dir.hpp"

namespace mcprt::io {

namespace fs = std::filesystem;

namespace {

constexpr const char* owner_key_name = "key.pem";
constexpr const char* owner_cert_name = "cert.pem";
// Long enough never to lapse under a running fleet: the identity is not a
// secret that rotates, the key file's mode is what guards it.
constexpr long owner_cert_days = 100L * 365;

struct owner_tls_bio_free {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct owner_tls_pkey_free {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct owner_tls_x509_free {
  void operator()(X509* x) const { X509_free(x); }
};
using owner_bio = std::unique_ptr<BIO, owner_tls_bio_free>;
using owner_pkey = std::unique_ptr<EVP_PKEY, owner_tls_pkey_free>;
using owner_x509 = std::unique_ptr<X509, owner_tls_x509_free>;

std::string owner_openssl_error() {
  std::string out;
  while (auto e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

std::string owner_bio_text(BIO* b) {
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  return n > 0 ? std::string(data, static_cast<std::size_t>(n)) : std::string();
}

// An encrypted key must fail, never prompt on the terminal.
int owner_tls_no_passphrase(char*, int, int, void*) {
  return -1;
}

/// The text of an identity file, checked like the owner's token file: a
/// regular file of ours, reached through no symbolic link, that nobody else
/// may write (nor read, for the key).
std::optional<std::string> read_identity_file(const fs::path& path, bool secret, std::string& error) {
  auto f = read_owner_file(path, secret ? 077 : 022, 64 * 1024, true);
  using problem = owner_file::problem;
  switch (f.what) {
    case problem::none:
      return std::move(f.text);
    case problem::symlink:
      error = path.string() + " is a symbolic link: mcprt uses only the file it made there; remove the link";
      break;
    case problem::cannot_open:
    case problem::cannot_read:
      error = "cannot read " + path.string() + ": " + std::strerror(f.error_number);
      break;
    case problem::not_regular:
      error = path.string() + " is not a regular file";
      break;
    case problem::not_ours:
      error = path.string() + " belongs to uid " + std::to_string(f.uid) + ", not to you (uid "
              + std::to_string(::geteuid()) + "): the owner's identity must be your own";
      break;
    case problem::mode:
      error = path.string() + (secret ? " can be read or written by others" : " can be written by others")
              + " (mode " + f.mode + "), and "
              + (secret ? "whoever holds the key is the owner on every CAF port"
                        : "it decides whom every CAF port trusts")
              + ": run `chmod 600 " + path.string() + "`"
              + (secret ? ", and remove the directory if someone else may have read it" : "");
      break;
    case problem::too_large:
      error = path.string() + " is larger than 64 KiB: not an identity mcprt made";
      break;
  }
  return std::nullopt;
}

std::string new_owner_key_pem(std::string& error) {
  owner_pkey key{EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256")};
  owner_bio out{BIO_new(BIO_s_mem())};
  if (!key || !out || PEM_write_bio_PrivateKey(out.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    error = "cannot make a key: " + owner_openssl_error();
    return {};
  }
  return owner_bio_text(out.get());
}

bool add_owner_extension(X509* cert, X509V3_CTX* ctx, int nid, const char* value) {
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, ctx, nid, value);
  if (ext == nullptr) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

/// A self-signed certificate for `key` that is its own CA: both ends of a
/// connection present it and trust only it. Key usage and extended key
/// usage name both TLS roles, so OpenSSL's purpose checks pass on the
/// listener and on the client.
std::string new_owner_cert_pem(EVP_PKEY* key, std::string& error) {
  owner_x509 cert{X509_new()};
  std::unique_ptr<BIGNUM, void (*)(BIGNUM*)> serial{BN_new(), BN_free};
  bool ok = cert && serial && X509_set_version(cert.get(), 2) == 1
            && BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1
            && BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) != nullptr
            && X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) != nullptr
            && X509_time_adj_ex(X509_getm_notAfter(cert.get()), owner_cert_days, 0, nullptr) != nullptr
            && X509_set_pubkey(cert.get(), key) == 1;
  if (ok) {
    auto cn = "mcprt owner uid " + std::to_string(::geteuid());
    X509_NAME* name = X509_get_subject_name(cert.get());
    ok = X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.c_str()),
                                    -1, -1, 0)
           == 1
         && X509_set_issuer_name(cert.get(), name) == 1;
  }
  if (ok) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
    ok = add_owner_extension(cert.get(), &ctx, NID_basic_constraints, "critical,CA:TRUE")
         && add_owner_extension(cert.get(), &ctx, NID_key_usage, "critical,digitalSignature,keyCertSign")
         && add_owner_extension(cert.get(), &ctx, NID_ext_key_usage, "serverAuth,clientAuth")
         && add_owner_extension(cert.get(), &ctx, NID_subject_key_identifier, "hash")
         && X509_sign(cert.get(), key, EVP_sha256()) > 0;
  }
  owner_bio out{BIO_new(BIO_s_mem())};
  if (!ok || !out || PEM_write_bio_X509(out.get(), cert.get()) != 1) {
    error = "cannot make a certificate: " + owner_openssl_error();
    return {};
  }
  return owner_bio_text(out.get());
}

owner_pkey parse_owner_key(const std::string& pem) {
  owner_bio in{BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()))};
  if (!in) return nullptr;
  return owner_pkey{PEM_read_bio_PrivateKey(in.get(), nullptr, owner_tls_no_passphrase, nullptr)};
}

owner_x509 parse_owner_cert(const std::string& pem) {
  owner_bio in{BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()))};
  if (!in) return nullptr;
  return owner_x509{PEM_read_bio_X509(in.get(), nullptr, owner_tls_no_passphrase, nullptr)};
}

/// Writes NAME once; a file already there is left to the checks that
/// follow (another process may have written it a moment ago).
bool write_identity_once(const state_dir& dir, const std::string& name, const std::string& text,
                         std::string& error) {
  bool existed = false;
  return dir.create_once(name, text, existed, error) || existed;
}

std::string owner_tls_failure(const std::string& why) {
  return "cannot use the owner's CAF identity: " + why;
}

} // namespace

owner_tls_result load_owner_tls(const fs::path& home) {
  owner_tls_result out;
  std::string error;
  auto mcprt_dir = state_dir::open(home, ".mcprt", error);
  auto dir = mcprt_dir ? state_dir::open(mcprt_dir->path(), "caf", error) : std::nullopt;
  if (!dir) {
    out.error = owner_tls_failure(error);
    return out;
  }
  out.files.key = dir->path() / owner_key_name;
  out.files.certificate = dir->path() / owner_cert_name;

  struct stat st {};
  if (::lstat(out.files.key.c_str(), &st) != 0 && errno == ENOENT) {
    auto pem = new_owner_key_pem(error);
    if (pem.empty() || !write_identity_once(*dir, owner_key_name, pem, error)) {
      out.error = owner_tls_failure(error);
      return out;
    }
  }
  auto key_text = read_identity_file(out.files.key, true, error);
  if (!key_text) {
    out.error = owner_tls_failure(error);
    return out;
  }
  auto key = parse_owner_key(*key_text);
  if (!key) {
    out.error = owner_tls_failure(out.files.key.string() + " holds no unencrypted PEM private key");
    return out;
  }
  if (::lstat(out.files.certificate.c_str(), &st) != 0 && errno == ENOENT) {
    auto pem = new_owner_cert_pem(key.get(), error);
    if (pem.empty() || !write_identity_once(*dir, owner_cert_name, pem, error)) {
      out.error = owner_tls_failure(error);
      return out;
    }
  }
  auto cert_text = read_identity_file(out.files.certificate, false, error);
  if (!cert_text) {
    out.error = owner_tls_failure(error);
    return out;
  }
  auto cert = parse_owner_cert(*cert_text);
  std::string remake =
    ": remove " + dir->path().string() + " and mcprt makes a new identity (every end then needs it)";
  if (!cert) out.error = owner_tls_failure(out.files.certificate.string() + " holds no PEM certificate" + remake);
  else if (X509_check_private_key(cert.get(), key.get()) != 1)
    out.error =
      owner_tls_failure(out.files.certificate.string() + " was not made for " + out.files.key.string() + remake);
  else if (X509_cmp_current_time(X509_get0_notAfter(cert.get())) <= 0)
    out.error = owner_tls_failure(out.files.certificate.string() + " has expired" + remake);
  ERR_clear_error();
  return out;
}

} // namespace mcprt::io
