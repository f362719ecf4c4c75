#include <memory>

#include <openssl/bio.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include "core/oauth.hpp"

namespace mcprt::oauth {

namespace {

struct evp_pkey_free {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct bio_free {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct md_ctx_free {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
struct ecdsa_sig_free {
  void operator()(ECDSA_SIG* s) const { ECDSA_SIG_free(s); }
};

// JWS wants r || s, each padded to the curve's size; OpenSSL gives DER.
std::string der_to_raw(const unsigned char* der, std::size_t len, std::size_t half) {
  const unsigned char* p = der;
  std::unique_ptr<ECDSA_SIG, ecdsa_sig_free> sig(d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(len)));
  if (!sig) return {};
  const BIGNUM* r = nullptr;
  const BIGNUM* s = nullptr;
  ECDSA_SIG_get0(sig.get(), &r, &s);
  std::string out(2 * half, '\0');
  if (BN_bn2binpad(r, reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(half)) < 0) return {};
  if (BN_bn2binpad(s, reinterpret_cast<unsigned char*>(out.data() + half), static_cast<int>(half)) < 0) return {};
  return out;
}

} // namespace

std::string sign_jwt(const nlohmann::json& claims, std::string_view pem, std::string_view alg, std::string* error) {
  auto fail = [&](std::string why) {
    if (error) *error = std::move(why);
    return std::string();
  };
  const EVP_MD* md = nullptr;
  bool ec = false, pss = false;
  std::size_t half = 0;
  if (alg == "ES256") md = EVP_sha256(), ec = true, half = 32;
  else if (alg == "ES384") md = EVP_sha384(), ec = true, half = 48;
  else if (alg == "RS256") md = EVP_sha256();
  else if (alg == "PS256") md = EVP_sha256(), pss = true;
  else return fail("unsupported signing algorithm (use ES256, ES384, RS256 or PS256)");
  if (pem.size() > 64 * 1024) return fail("private key is too large");

  std::unique_ptr<BIO, bio_free> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return fail("out of memory");
  std::unique_ptr<EVP_PKEY, evp_pkey_free> key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) return fail("the private key is not a PEM private key");
  const int type = EVP_PKEY_base_id(key.get());
  if (ec != (type == EVP_PKEY_EC)) return fail("the private key does not fit the signing algorithm " + std::string(alg));

  const std::string header = base64url(nlohmann::json{{"alg", alg}, {"typ", "JWT"}}.dump());
  const std::string input = header + "." + base64url(claims.dump());
  std::unique_ptr<EVP_MD_CTX, md_ctx_free> ctx(EVP_MD_CTX_new());
  EVP_PKEY_CTX* pctx = nullptr;
  if (!ctx || EVP_DigestSignInit(ctx.get(), &pctx, md, nullptr, key.get()) != 1) return fail("signing failed");
  if (pss && (EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) != 1
              || EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) != 1))
    return fail("signing failed");
  std::size_t len = 0;
  auto data = reinterpret_cast<const unsigned char*>(input.data());
  if (EVP_DigestSign(ctx.get(), nullptr, &len, data, input.size()) != 1) return fail("signing failed");
  std::string sig(len, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len, data, input.size()) != 1)
    return fail("signing failed");
  sig.resize(len);
  if (ec) {
    sig = der_to_raw(reinterpret_cast<const unsigned char*>(sig.data()), sig.size(), half);
    if (sig.empty()) return fail("signing failed");
  }
  return input + "." + base64url(sig);
}

} // namespace mcprt::oauth
