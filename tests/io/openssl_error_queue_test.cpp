// mcprt's SSL_read and SSL_write (io/openssl_error_queue): a stale error in
// the thread's OpenSSL queue must not turn "no bytes yet" into a failure.
// Real OpenSSL over a BIO pair, TLS 1.2 with an anonymous cipher, so no
// certificate is needed.

#include <gtest/gtest.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "io/openssl_error_queue.hpp"

namespace {

struct tls_pair {
  tls_pair() {
    for (auto* ctx : {&client_ctx, &server_ctx}) {
      *ctx = SSL_CTX_new(TLS_method());
      SSL_CTX_set_max_proto_version(*ctx, TLS1_2_VERSION);
      SSL_CTX_set_cipher_list(*ctx, "aNULL:@SECLEVEL=0");
    }
    client = SSL_new(client_ctx);
    server = SSL_new(server_ctx);
    BIO *c = nullptr, *s = nullptr;
    BIO_new_bio_pair(&c, 0, &s, 0);
    SSL_set_bio(client, c, c);
    SSL_set_bio(server, s, s);
    SSL_set_connect_state(client);
    SSL_set_accept_state(server);
  }
  ~tls_pair() {
    SSL_free(client);
    SSL_free(server);
    SSL_CTX_free(client_ctx);
    SSL_CTX_free(server_ctx);
  }

  /// Both ends step their handshake until both are done (or 100 rounds).
  bool handshake() {
    for (int round = 0; round < 100; ++round) {
      int c = SSL_do_handshake(client), s = SSL_do_handshake(server);
      if (c == 1 && s == 1) return true;
    }
    return false;
  }

  SSL_CTX *client_ctx = nullptr, *server_ctx = nullptr;
  SSL *client = nullptr, *server = nullptr;
};

} // namespace

TEST(OpenSslErrorQueue, AStaleErrorNoLongerFailsAReadThatOnlyWantsMoreBytes) {
  tls_pair p;
  ASSERT_TRUE(p.handshake()) << ERR_error_string(ERR_get_error(), nullptr);
  char buf[16];
  // What OpenSSL does on its own: the stale error wins over "want read".
  ERR_put_error(ERR_LIB_SSL, 0, SSL_R_WRONG_VERSION_NUMBER, __FILE__, __LINE__);
  int r = SSL_read(p.client, buf, sizeof buf);
  EXPECT_EQ(r, -1);
  EXPECT_EQ(SSL_get_error(p.client, r), SSL_ERROR_SSL);
  ERR_clear_error();

  EXPECT_TRUE(mcprt::io::clear_openssl_errors_before_io()) << "SSL_read does not resolve to mcprt's";
  ERR_put_error(ERR_LIB_SSL, 0, SSL_R_WRONG_VERSION_NUMBER, __FILE__, __LINE__);
  r = SSL_read(p.client, buf, sizeof buf);
  EXPECT_EQ(r, -1);
  EXPECT_EQ(SSL_get_error(p.client, r), SSL_ERROR_WANT_READ);
  // The connection still carries data both ways.
  ERR_put_error(ERR_LIB_SSL, 0, SSL_R_WRONG_VERSION_NUMBER, __FILE__, __LINE__);
  ASSERT_EQ(SSL_write(p.server, "hello", 5), 5);
  ASSERT_EQ(SSL_read(p.client, buf, sizeof buf), 5);
  EXPECT_EQ(std::string(buf, 5), "hello");
}
