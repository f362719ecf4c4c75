#pragma once

// OpenSSL keeps one error queue per thread, and SSL_get_error() reads it:
// a call that only wants more bytes is reported as a failure when an older
// error still sits in the queue. OpenSSL's own handshake clears the queue,
// its reads and writes do not, and CAF's openssl module (0.17.6) never
// drains it when logging is compiled out. So a stranger's failed handshake
// on the middleman's thread made the next read of an established TLS
// connection on that thread fail, and anyone who could reach a budget
// server's port could cut every node off.
//
// mcprt defines SSL_read and SSL_write itself: once turned on, they empty
// the calling thread's queue and go on to OpenSSL's. That is what OpenSSL
// asks of every caller ("the current thread's error queue must be empty
// before the TLS/SSL I/O operation is attempted"), so other users of
// OpenSSL in the process lose nothing.

namespace mcprt::io {

/// Turns the clearing on for the whole process, for good; idempotent.
/// Whoever loads caf::openssl::manager calls it. False when the dynamic
/// linker resolves SSL_read to another definition than mcprt's (a program
/// that hides the symbols of the libraries it links): then nothing clears.
bool clear_openssl_errors_before_io();

} // namespace mcprt::io
