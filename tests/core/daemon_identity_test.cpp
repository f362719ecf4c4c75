#include "core/daemon_identity.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace mcprt;

TEST(DaemonRecord, ParsesWhatServeWrites) {
  auto r = parse_daemon_record(R"({"url": "http://127.0.0.1:4100", "pid": 77, "instance": "ab12",
                                   "workspace": "/w", "approvals": "/h/a.json"})");
  ASSERT_TRUE(r.record) << r.error;
  EXPECT_EQ(r.record->url, "http://127.0.0.1:4100");
  EXPECT_EQ(r.record->pid, 77);
  EXPECT_EQ(r.record->instance, "ab12");
  // An older daemon wrote no instance.
  r = parse_daemon_record(R"({"url": "http://127.0.0.1:1", "pid": 5})");
  ASSERT_TRUE(r.record);
  EXPECT_EQ(r.record->instance, "");
}

TEST(DaemonRecord, RefusesAnythingElseWithoutQuotingIt) {
  for (auto t : {"", "[]", "{}", R"({"url": 5, "pid": 1})", R"({"url": "x", "pid": -1})", R"({"url": "x", "pid": "1"})",
                 R"({"url": "x", "pid": 99999999999})", R"({"url": "x", "pid": 1, "instance": 3})",
                 "{\"url\": \"s3cret\xff\", \"pid\": 1}", R"({"url": "", "pid": 1})"}) {
    auto r = parse_daemon_record(t);
    EXPECT_FALSE(r.record) << t;
    EXPECT_FALSE(r.error.empty()) << t;
    EXPECT_EQ(r.error.find("s3cret"), std::string::npos) << r.error;
  }
  auto deep = std::string(1000, '[');
  EXPECT_FALSE(parse_daemon_record(deep).record);
}

TEST(DaemonRecord, HttpUrlsOnly) {
  auto e = parse_http_url("http://127.0.0.1:4100");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->host, "127.0.0.1");
  EXPECT_EQ(e->port, 4100);
  e = parse_http_url("http://[::1]:80/");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->host, "::1");
  EXPECT_EQ(e->port, 80);
  for (auto u : {"https://127.0.0.1:1", "http://127.0.0.1", "http://127.0.0.1:0", "http://127.0.0.1:65536",
                 "http://evil@127.0.0.1:1", "http://127.0.0.1:1/x", "http://:1", "http://a b:1", "127.0.0.1:1",
                 "http://[::1]1"})
    EXPECT_FALSE(parse_http_url(u)) << u;
}

TEST(ProcNetTcp, FindsListeningSocketsWithTheirInodes) {
  std::string v4 =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    "   0: 0100007F:1004 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5551 1 0 100 0 0 10 0\n"
    "   1: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 5552 1 0 100 0 0 10 0\n"
    "   2: 0100007F:1004 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 5553 1 0 20 4 30 10 -1\n"
    "garbage line\n";
  auto socks = parse_proc_net_tcp(v4, false);
  ASSERT_EQ(socks.size(), 2u);
  EXPECT_EQ(socks[0].address, "127.0.0.1");
  EXPECT_EQ(socks[0].port, 4100);
  EXPECT_EQ(socks[0].inode, 5551u);
  EXPECT_EQ(socks[1].address, "0.0.0.0");
  EXPECT_EQ(socks[1].port, 8080);
  std::string v6 =
    "  sl  local_address                         remote_address                        st tx_queue rx_queue tr "
    "tm->when retrnsmt   uid  timeout inode\n"
    "   0: 00000000000000000000000001000000:1004 00000000000000000000000000000000:0000 0A 00000000:00000000 "
    "00:00000000 00000000     0        0 6661 1 0 100 0 0 10 0\n";
  socks = parse_proc_net_tcp(v6, true);
  ASSERT_EQ(socks.size(), 1u);
  EXPECT_EQ(socks[0].address, "::1");
  EXPECT_EQ(socks[0].inode, 6661u);
  EXPECT_EQ(connect_address("0.0.0.0"), "127.0.0.1");
  EXPECT_EQ(connect_address("::"), "::1");
  EXPECT_EQ(connect_address("127.0.0.1"), "127.0.0.1");
}

TEST(ServeCommandLine, FindsTheWorkspaceArgument) {
  EXPECT_EQ(split_cmdline(std::string("mcprt\0serve\0-w\0/a\0", 18)),
            (std::vector<std::string>{"mcprt", "serve", "-w", "/a"}));
  using v = std::vector<std::string>;
  EXPECT_EQ(serve_workspace_arg(v{"mcprt", "serve"}), ".");
  EXPECT_EQ(serve_workspace_arg(v{"mcprt", "serve", "--workspace", "/w", "--home", "/h"}), "/w");
  EXPECT_EQ(serve_workspace_arg(v{"mcprt", "serve", "--workspace=/w"}), "/w");
  EXPECT_EQ(serve_workspace_arg(v{"mcprt", "serve", "-w", "rel"}), "rel");
  EXPECT_EQ(serve_workspace_arg(v{"mcprt", "serve", "-wrel"}), "rel");
  EXPECT_EQ(serve_workspace_arg(v{"mcprt", "serve", "-w", "/a", "--workspace", "/b"}), "/b");
  EXPECT_EQ(serve_workspace_arg(v{"mcprt", "status", "--workspace", "/w"}), std::nullopt);
  EXPECT_EQ(serve_workspace_arg(v{"python3", "-m", "http.server"}), std::nullopt);
  EXPECT_EQ(serve_workspace_arg(v{"mcprt"}), std::nullopt);
}

TEST(TokenStrength, OnlyALineOfRandomHexOrBase64IsAToken) {
  // What `openssl rand` and mcprt's own ~/.mcprt/token make.
  EXPECT_EQ(weak_token_reason("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"), "");
  EXPECT_EQ(weak_token_reason("0123456789abcdefFEDCBA9876543210"), "");
  EXPECT_EQ(weak_token_reason("q2Zr9_Xw-4LpT0mYb7KcVd"), "");                    // 22 base64url
  EXPECT_EQ(weak_token_reason("kO3n+7Qz/1WvY8aR5tLbXm2Pc4sE9hJu0dFgHiKjLl4="), ""); // openssl rand -base64 32
  // The first lines of files an attacker could name, and tokens too short.
  for (auto weak : {"{", "[section]", "{\"version\":1,\"approvals\":[]}", "https://alice:ghp_0123456789abcdef@github.com",
                    "tok", "s3cret-token", "0123456789abcdef0123456789abcde", "q2Zr9_Xw-4LpT0mYb7KcV",
                    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "abababababababababababababababab",
                    "q2Zr9_Xw-4LpT0mYb7KcVd===", "key=0123456789abcdef0123456789abcdef"}) {
    auto why = weak_token_reason(weak);
    EXPECT_NE(why, "") << weak;
    EXPECT_NE(why.find("openssl rand -hex 32"), std::string::npos) << why;
    if (std::string_view(weak).size() > 8) EXPECT_EQ(why.find(weak), std::string::npos) << "the reason quotes the line";
  }
}
