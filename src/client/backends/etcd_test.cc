// Tests of the etcd:// backend (etcd.cc) and its HTTP/JSON pieces
// (etcd_http.h): URL and option errors, the parsers on bad input, and the
// lock recipe against a real etcd started by tests/backends/servers/etcd.sh:
// exclusion, try-lock writing nothing, timed waits leaving no key, FIFO
// order, tokens = create revisions, reentrancy, wake-up latency, a SIGKILLed
// holder process released by lease expiry, a revoked lease and a stopped
// server giving kSessionLost and OnSessionLost without hangs, fail-over past
// a dead member.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "client/backends/backends.h"
#include "client/backends/etcd_http.h"
#include "client/backends/test_support.h"
#include "client/url.h"
#include "tumbler/client.h"

namespace tumbler {
namespace {

using namespace std::chrono_literals;
using client::etcd::Base64Decode;
using client::etcd::Base64Encode;
using client::etcd::HttpBodyDecoder;
using client::etcd::HttpHead;
using client::etcd::Json;
using client::etcd::ParseHttpHead;
using client::etcd::ParseJson;
using Clock = std::chrono::steady_clock;
using testing::ExternalServer;
using testing::UniqueName;

// --- URL and options ---------------------------------------------------------------

TEST(EtcdUrlTest, RejectsMalformedUrls) {
  const char* bad[] = {
      "etcd://",                   // no host
      "etcd:///ns",                // no host
      "etcd://:2379",              // empty host
      "etcd://127.0.0.1:0",        // port 0
      "etcd://127.0.0.1:70000",    // port out of range
      "etcd://127.0.0.1:x",        // not a number
      "etcd://a:1,,b:2",           // empty host in the list
      "etcd://a:1,",               // trailing comma
      "etcd://[::1",               // unbalanced bracket
      "etcd://u:p@127.0.0.1:2379", // user info
      "etcd://127.0.0.1:2379?x=1", // query
      "etcd://127.0.0.1:2379/bad ns",  // space in the namespace
      "etcd://127.0.0.1:2379/a%2f",    // escapes are not decoded
  };
  for (const char* url : bad) {
    Result<std::shared_ptr<client::Backend>> made = client::MakeEtcdBackend(url, {});
    ASSERT_FALSE(made.ok()) << url;
    EXPECT_EQ(made.status().code(), StatusCode::kInvalidArgument) << url;
    EXPECT_NE(made.status().message().find("etcd URL"), std::string::npos)
        << made.status().message();
  }
  std::string many = "etcd://";
  for (int i = 0; i < 17; ++i) many += (i ? ",h" : "h") + std::to_string(i);
  EXPECT_EQ(client::MakeEtcdBackend(many, {}).status().code(), StatusCode::kInvalidArgument);
  std::string long_ns = "etcd://h/" + std::string(300, 'n');
  EXPECT_EQ(client::MakeEtcdBackend(long_ns, {}).status().code(), StatusCode::kInvalidArgument);
}

TEST(EtcdUrlTest, AcceptsTheDocumentedForms) {
  const char* good[] = {
      "etcd://127.0.0.1",  "etcd://127.0.0.1:2379",      "ETCD://localhost:1/",
      "etcd://[::1]",      "etcd://[::1]:2379/app/locks", "etcd://a:1,b:2,c:3/x.y_z-w",
  };
  for (const char* url : good) {
    Result<std::shared_ptr<client::Backend>> made = client::MakeEtcdBackend(url, {});
    EXPECT_TRUE(made.ok()) << url << ": " << made.status().ToString();
  }
}

TEST(EtcdUrlTest, RejectsOptionsOutOfRange) {
  auto with = [](auto change) {
    ClientOptions options;
    change(options);
    return client::MakeBackend("etcd://127.0.0.1:2379", options).status().code();
  };
  EXPECT_EQ(with([](ClientOptions& o) { o.session_ttl = 99ms; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](ClientOptions& o) { o.session_ttl = 3'600'001ms; }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](ClientOptions& o) { o.op_timeout = 0ms; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](ClientOptions& o) { o.connect_timeout = 0ms; }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](ClientOptions& o) { o.connections_max = 0; }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](ClientOptions& o) { o.session_name = std::string(257, 'x'); }),
            StatusCode::kInvalidArgument);
}

TEST(EtcdUrlTest, CapabilitiesAreInPropertyOrder) {
  const BackendInfo& info = client::EtcdBackendInfo();
  ASSERT_EQ(info.capabilities.size(), static_cast<size_t>(kPropertyCount));
  for (int i = 0; i < kPropertyCount; ++i) {
    EXPECT_EQ(info.capabilities[i].property, static_cast<Property>(i));
    EXPECT_FALSE(info.capabilities[i].note.empty());
  }
  EXPECT_FALSE(info.Supports(Property::kSharedMode));
  EXPECT_TRUE(info.Supports(Property::kFencing));
}

// --- JSON ---------------------------------------------------------------------------

TEST(EtcdJsonTest, ParsesGatewayReplies) {
  Result<Json> j = ParseJson(
      R"( {"header":{"revision":"42","raft_term":"2"},"kvs":[{"key":"YS8x","create_revision":"7"}],)"
      R"("succeeded":true,"n":-12,"f":1.5e3,"s":"a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00","z":null} )");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->Find("header")->Find("revision")->AsInt64(), 42);
  EXPECT_EQ(j->Find("kvs")->items().at(0).Find("create_revision")->AsInt64(), 7);
  EXPECT_TRUE(j->Find("succeeded")->boolean());
  EXPECT_EQ(j->Find("n")->AsInt64(), -12);
  EXPECT_EQ(j->Find("f")->AsInt64(), std::nullopt);  // not an integer
  EXPECT_EQ(j->Find("s")->text(), "a\"\\/\b\f\n\r\t\xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_EQ(j->Find("z")->type(), Json::Type::kNull);
  EXPECT_EQ(j->Find("missing"), nullptr);
  EXPECT_EQ(j->Find("n")->Find("x"), nullptr);  // not an object
}

TEST(EtcdJsonTest, Int64Bounds) {
  EXPECT_EQ(ParseJson(R"("9223372036854775807")")->AsInt64(), INT64_MAX);
  EXPECT_EQ(ParseJson(R"("-9223372036854775808")")->AsInt64(), INT64_MIN);
  EXPECT_EQ(ParseJson(R"("9223372036854775808")")->AsInt64(), std::nullopt);
  EXPECT_EQ(ParseJson(R"("99999999999999999999")")->AsInt64(), std::nullopt);
  EXPECT_EQ(ParseJson(R"("")")->AsInt64(), std::nullopt);
  EXPECT_EQ(ParseJson(R"("-")")->AsInt64(), std::nullopt);
  EXPECT_EQ(ParseJson(R"("12a")")->AsInt64(), std::nullopt);
  EXPECT_EQ(ParseJson(R"(true)")->AsInt64(), std::nullopt);
}

TEST(EtcdJsonTest, RejectsBadInput) {
  const char* bad[] = {
      "",          "   ",        "{",           "}",          "[1,]",        "[1 2]",
      "{\"a\"}",   "{\"a\":}",   "{\"a\":1,}",  "{a:1}",      "{\"a\":1 \"b\":2}",
      "\"abc",     "\"\\x\"",    "\"\\u12\"",   "\"\\uZZZZ\"", "\"\\ud800\"", "\"\\udc00\"",
      "\"\\ud800\\u0041\"",      "01",          "-",          "1.",          "1e",
      "+1",        ".5",         "tru",         "nul",        "{} {}",       "[1]x",
      "{\"a\":1,\"a\":2}",       "\"a\nb\"",
  };
  for (const char* text : bad) {
    Result<Json> j = ParseJson(text);
    EXPECT_FALSE(j.ok()) << "accepted: " << text;
    if (!j.ok()) {
      EXPECT_EQ(j.status().code(), StatusCode::kProtocol) << text;
    }
  }
  std::string deep(client::etcd::kJsonDepthMax + 1, '[');
  deep += std::string(client::etcd::kJsonDepthMax + 1, ']');
  EXPECT_FALSE(ParseJson(deep).ok());
  std::string ok_depth(client::etcd::kJsonDepthMax, '[');
  ok_depth += std::string(client::etcd::kJsonDepthMax, ']');
  EXPECT_TRUE(ParseJson(ok_depth).ok());
  std::string huge = "\"" + std::string(client::etcd::kJsonBytesMax, 'x') + "\"";
  EXPECT_FALSE(ParseJson(huge).ok());
}

TEST(EtcdJsonTest, QuoteEscapes) {
  EXPECT_EQ(client::etcd::JsonQuote("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\u000a\\u0001\"");
  Result<Json> back = ParseJson(client::etcd::JsonQuote(std::string("x\0y\x1f\"", 5)));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->text(), std::string("x\0y\x1f\"", 5));
}

// --- Base64 -------------------------------------------------------------------------

TEST(EtcdBase64Test, RoundTripsAndRejectsNonCanonical) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  for (size_t n = 0; n <= all.size(); n += 37) {
    EXPECT_EQ(Base64Decode(Base64Encode(all.substr(0, n))), all.substr(0, n));
  }
  const char* bad[] = {"Zg=", "Zg", "Z===", "Zh==", "Zm9=", "Zm9v!AAA", "=Zm9", "Zg==Zg==",
                       "Zm 9v"};
  for (const char* text : bad) EXPECT_EQ(Base64Decode(text), std::nullopt) << text;
}

// --- HTTP ---------------------------------------------------------------------------

TEST(EtcdHttpTest, ParsesHeads) {
  Result<HttpHead> h = ParseHttpHead(
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-length:  12 \r\n\r\n");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(h->content_length, 12u);
  EXPECT_FALSE(h->chunked);
  EXPECT_FALSE(h->close);
  h = ParseHttpHead("HTTP/1.1 404 Not Found\r\nTransfer-Encoding: Chunked\r\n"
                    "Content-Length: 5\r\nConnection: keep-alive, Close\r\n\r\n");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->status, 404);
  EXPECT_TRUE(h->chunked);
  EXPECT_FALSE(h->content_length.has_value());
  EXPECT_TRUE(h->close);
  h = ParseHttpHead("HTTP/1.0 200\r\n\r\n");
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->close);
}

TEST(EtcdHttpTest, RejectsBadHeads) {
  const char* bad[] = {
      "HTTP/1.1 200 OK\r\n",                                       // no blank line
      "HTTP/2 200 OK\r\n\r\n",                                     // not 1.x
      "HTTP/1.1 20 OK\r\n\r\n",                                    // short status
      "HTTP/1.1 2x0 OK\r\n\r\n",                                   // not digits
      "HTTP/1.1 999 OK\r\n\r\n",                                   // out of range
      "HTTP/1.1 200OK\r\n\r\n",                                    // no space
      "SMTP/1.1 200 OK\r\n\r\n",                                   // not HTTP
      "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",             // negative
      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",  // conflict
      "HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n",    // over the bound
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",        // unsupported coding
      "HTTP/1.1 200 OK\r\nX: 1\r\n folded\r\n\r\n",                // obsolete folding
      "HTTP/1.1 200 OK\r\nno colon\r\n\r\n",                       // no name
      "HTTP/1.1 200 OK\r\n: v\r\n\r\n",                            // empty name
      "HTTP/1.1 200 OK\r\nBad Name: v\r\n\r\n",                    // space in the name
  };
  for (const char* head : bad) {
    Result<HttpHead> h = ParseHttpHead(head);
    EXPECT_FALSE(h.ok()) << "accepted: " << head;
    if (!h.ok()) {
      EXPECT_EQ(h.status().code(), StatusCode::kProtocol);
    }
  }
  std::string huge = "HTTP/1.1 200 OK\r\nX: " + std::string(client::etcd::kHttpHeadBytesMax, 'x') +
                     "\r\n\r\n";
  EXPECT_FALSE(ParseHttpHead(huge).ok());
}

HttpHead Chunked() {
  HttpHead head;
  head.status = 200;
  head.chunked = true;
  return head;
}

// Feeds `raw` to a decoder `step` bytes at a time; the decoded body, or the
// first error.
Result<std::string> Decode(const HttpHead& head, const std::string& raw, size_t step,
                           bool eof_at_end, bool* done) {
  HttpBodyDecoder decoder(head);
  std::string pending, out;
  for (size_t i = 0; i < raw.size(); i += step) {
    pending += raw.substr(i, step);
    if (Status s = decoder.Feed(&pending, &out); !s.ok()) return s;
  }
  if (eof_at_end) {
    if (Status s = decoder.FeedEof(); !s.ok()) return s;
  }
  *done = decoder.done();
  return out;
}

TEST(EtcdHttpTest, DecodesChunkedBodiesSplitAnywhere) {
  const std::string raw =
      "5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nGrpc-Trailer: x\r\n\r\n";
  for (size_t step = 1; step <= raw.size(); ++step) {
    bool done = false;
    Result<std::string> body = Decode(Chunked(), raw, step, false, &done);
    ASSERT_TRUE(body.ok()) << step << ": " << body.status().ToString();
    EXPECT_EQ(*body, "hello 0123456789") << step;
    EXPECT_TRUE(done) << step;
  }
}

TEST(EtcdHttpTest, RejectsBadChunks) {
  const char* bad[] = {
      "x\r\nhello\r\n0\r\n\r\n",          // not hex
      "\r\nhello\r\n0\r\n\r\n",           // empty size
      "5\r\nhelloXX0\r\n\r\n",            // data not followed by CRLF
      "123456789\r\n",                    // size over the bound
      "-1\r\n",                           // sign
  };
  for (const char* raw : bad) {
    bool done = false;
    EXPECT_FALSE(Decode(Chunked(), raw, 1, false, &done).ok()) << raw;
  }
  // A size line that never ends is refused once it passes its bound.
  bool done = false;
  std::string endless(client::etcd::kHttpChunkLineBytesMax + 10, '0');
  EXPECT_FALSE(Decode(Chunked(), endless, 7, false, &done).ok());
  // A trailer that never ends likewise.
  std::string trailer = "0\r\n" + std::string(client::etcd::kHttpHeadBytesMax + 10, 'x');
  EXPECT_FALSE(Decode(Chunked(), trailer, 100, false, &done).ok());
  // The peer closing inside a chunk is an error, not a short body.
  EXPECT_FALSE(Decode(Chunked(), "5\r\nhel", 1, true, &done).ok());
}

TEST(EtcdHttpTest, DecodesLengthAndUntilCloseBodies) {
  HttpHead head;
  head.status = 200;
  head.content_length = 3;
  bool done = false;
  Result<std::string> body = Decode(head, "abcEXTRA", 2, false, &done);
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(*body, "abc");  // what follows is not this body's
  EXPECT_TRUE(done);
  EXPECT_FALSE(Decode(head, "ab", 1, true, &done).ok());  // truncated

  HttpHead until_close;
  until_close.status = 200;
  body = Decode(until_close, "all of it", 4, true, &done);
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(*body, "all of it");
  EXPECT_TRUE(done);

  HttpHead no_content;
  no_content.status = 204;
  body = Decode(no_content, "", 1, false, &done);
  ASSERT_TRUE(body.ok());
  EXPECT_TRUE(done);
}

// --- Against a real etcd ---------------------------------------------------------

// One etcd for the cases that share it (the stop test starts its own),
// started on first use and stopped when the process exits.
ExternalServer& SharedEtcd() {
  static std::unique_ptr<ExternalServer> server = std::make_unique<ExternalServer>("etcd");
  return *server;
}

client::Endpoint EndpointOf(const std::string& url) {
  Result<client::Endpoint> e = client::ParseHostPort(url.substr(std::string("etcd://").size()));
  EXPECT_TRUE(e.ok()) << url;
  return e.ok() ? *e : client::Endpoint{};
}

// A raw gateway call, to look at what the backend left in etcd.
Json EtcdCall(const std::string& url, const std::string& path, const std::string& body) {
  client::etcd::HttpConnection conn;
  Clock::time_point deadline = Clock::now() + 5s;
  Status opened = conn.Open(EndpointOf(url), deadline);
  EXPECT_TRUE(opened.ok()) << opened.ToString();
  Result<HttpHead> head = conn.Post(path, body, deadline, nullptr);
  EXPECT_TRUE(head.ok()) << head.status().ToString();
  if (!head.ok()) return Json();
  EXPECT_EQ(head->status, 200);
  Result<std::string> text = conn.ReadBody(deadline);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  Result<Json> j = ParseJson(text.ok() ? *text : "");
  EXPECT_TRUE(j.ok()) << j.status().ToString();
  return j.ok() ? *j : Json();
}

int64_t Int(const Json& j, const char* field) {
  const Json* f = j.Find(field);
  return f == nullptr ? 0 : f->AsInt64().value_or(-1);
}

// The keys etcd holds for lock `name` (default namespace), in create order:
// (key, create revision).
std::vector<std::pair<std::string, int64_t>> LockKeys(const std::string& url,
                                                      const std::string& name) {
  std::string prefix = "tumbler/locks/" + std::to_string(name.size()) + ":" + name + "/";
  std::string end = prefix;
  end.back() = static_cast<char>(end.back() + 1);
  Json reply = EtcdCall(url, "/v3/kv/range",
                        "{\"key\":\"" + Base64Encode(prefix) + "\",\"range_end\":\"" +
                            Base64Encode(end) +
                            "\",\"sort_target\":\"CREATE\",\"sort_order\":\"ASCEND\"}");
  std::vector<std::pair<std::string, int64_t>> out;
  if (const Json* kvs = reply.Find("kvs")) {
    for (const Json& kv : kvs->items()) {
      out.emplace_back(Base64Decode(kv.Find("key")->text()).value_or("?"),
                       Int(kv, "create_revision"));
    }
  }
  return out;
}

int64_t StoreRevision(const std::string& url) {
  Json reply = EtcdCall(url, "/v3/kv/range", "{\"key\":\"AA==\"}");
  const Json* header = reply.Find("header");
  return header ? Int(*header, "revision") : -1;
}

class EtcdBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(SharedEtcd().ok()) << SharedEtcd().error();
    url_ = SharedEtcd().url();
  }

  Client Connect(std::chrono::milliseconds ttl = 5s, const std::string& url = "") {
    ClientOptions options;
    options.session_ttl = ttl;
    options.op_timeout = 3s;
    options.connect_timeout = 1s;
    Result<Client> client = Client::Connect(url.empty() ? url_ : url, options);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    if (!client.ok()) std::abort();
    return std::move(client).value();
  }

  std::string url_;
};

TEST_F(EtcdBackendTest, TwoClientsExcludeAndTryLockWritesNothing) {
  Client a = Connect();
  Client b = Connect();
  EXPECT_EQ(a.backend().scheme, "etcd");
  EXPECT_NE(a.SessionId(), b.SessionId());
  const std::string name = UniqueName("excl");
  Mutex ma = a.NewMutex(name);
  Mutex mb = b.NewMutex(name);
  ASSERT_TRUE(ma.Lock().ok());
  ASSERT_EQ(LockKeys(url_, name).size(), 1u);
  int64_t before = StoreRevision(url_);
  Result<bool> busy = mb.TryLock();
  ASSERT_TRUE(busy.ok()) << busy.status().ToString();
  EXPECT_FALSE(*busy);
  EXPECT_EQ(StoreRevision(url_), before) << "a try-lock of a busy lock wrote to etcd";
  EXPECT_EQ(mb.token(), 0u);
  ASSERT_TRUE(ma.Unlock().ok());
  EXPECT_TRUE(LockKeys(url_, name).empty());
  Result<bool> free = mb.TryLock();
  ASSERT_TRUE(free.ok()) << free.status().ToString();
  EXPECT_TRUE(*free);
  // The token is the create revision of the holder's key.
  std::vector<std::pair<std::string, int64_t>> keys = LockKeys(url_, name);
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(mb.token(), static_cast<uint64_t>(keys[0].second));
  EXPECT_NE(keys[0].first.find(name), std::string::npos);
  EXPECT_TRUE(mb.Unlock().ok());
  // Unlocking what is not held is the caller's error, answered locally.
  EXPECT_EQ(mb.Unlock().code(), StatusCode::kNotHeld);
}

TEST_F(EtcdBackendTest, NamesThatArePrefixesOfEachOtherAreDifferentLocks) {
  Client a = Connect();
  Client b = Connect();
  const std::string name = UniqueName("pfx");
  Mutex ma = a.NewMutex(name);
  Mutex mb = b.NewMutex(name + "/sub");
  ASSERT_TRUE(ma.Lock().ok());
  Result<bool> got = mb.TryLock();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(*got);
  EXPECT_TRUE(mb.Unlock().ok());
  EXPECT_TRUE(ma.Unlock().ok());
}

TEST_F(EtcdBackendTest, TimedWaitTimesOutAndLeavesNoKey) {
  Client a = Connect();
  Client b = Connect();
  const std::string name = UniqueName("timed");
  Mutex ma = a.NewMutex(name);
  Mutex mb = b.NewMutex(name);
  ASSERT_TRUE(ma.Lock().ok());
  Clock::time_point start = Clock::now();
  std::thread peek([&] {
    // While b waits, its key is queued behind a's.
    std::this_thread::sleep_for(250ms);
    EXPECT_EQ(LockKeys(url_, name).size(), 2u);
  });
  Result<bool> timed = mb.TryLockFor(600ms);
  auto took = Clock::now() - start;
  peek.join();
  ASSERT_TRUE(timed.ok()) << timed.status().ToString();
  EXPECT_FALSE(*timed);
  EXPECT_GE(took, 600ms);
  EXPECT_LT(took, 3s);
  EXPECT_EQ(LockKeys(url_, name).size(), 1u) << "the timed-out waiter's key stayed behind";
  EXPECT_TRUE(ma.Unlock().ok());
  EXPECT_TRUE(LockKeys(url_, name).empty());
}

TEST_F(EtcdBackendTest, WaitersAreGrantedInArrivalOrder) {
  Client holder = Connect();
  const std::string name = UniqueName("fifo");
  Mutex mh = holder.NewMutex(name);
  ASSERT_TRUE(mh.Lock().ok());
  constexpr int kWaiters = 3;
  std::vector<Client> clients;
  for (int i = 0; i < kWaiters; ++i) clients.push_back(Connect());
  std::mutex order_mu;
  std::vector<int> order;
  std::vector<uint64_t> tokens;
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      Mutex m = clients[i].NewMutex(name);
      Status s = m.Lock();
      EXPECT_TRUE(s.ok()) << s.ToString();
      {
        std::lock_guard lock(order_mu);
        order.push_back(i);
        tokens.push_back(m.token());
      }
      std::this_thread::sleep_for(20ms);
      EXPECT_TRUE(m.Unlock().ok());
    });
    // The next waiter starts only once this one is visibly queued.
    Clock::time_point until = Clock::now() + 5s;
    while (LockKeys(url_, name).size() < static_cast<size_t>(i + 2) && Clock::now() < until) {
      std::this_thread::sleep_for(10ms);
    }
    ASSERT_EQ(LockKeys(url_, name).size(), static_cast<size_t>(i + 2));
  }
  ASSERT_TRUE(mh.Unlock().ok());
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  ASSERT_EQ(tokens.size(), 3u);
  EXPECT_LT(tokens[0], tokens[1]);
  EXPECT_LT(tokens[1], tokens[2]);
}

TEST_F(EtcdBackendTest, TokensStrictlyIncreaseAcrossClientsAndThreads) {
  Client a = Connect();
  Client b = Connect();
  const std::string name = UniqueName("tokens");
  uint64_t last = 0;
  for (int i = 0; i < 10; ++i) {
    Client& c = (i % 2 == 0) ? a : b;
    Mutex m = c.NewMutex(name);
    ASSERT_TRUE(m.Lock().ok());
    Result<uint64_t> token = m.FencingToken();
    ASSERT_TRUE(token.ok()) << token.status().ToString();
    EXPECT_GT(*token, last) << "round " << i;
    last = *token;
    ASSERT_TRUE(m.Unlock().ok());
  }
  Mutex m = a.NewMutex(name);
  EXPECT_EQ(m.FencingToken().status().code(), StatusCode::kNotHeld);
}

TEST_F(EtcdBackendTest, ReentrancyIsCountedInTheClient) {
  Client a = Connect();
  Client b = Connect();
  const std::string name = UniqueName("reent");
  Mutex m = a.NewMutex(name);
  ASSERT_TRUE(m.Lock().ok());
  uint64_t token = m.token();
  ASSERT_TRUE(m.TryLock().value());
  ASSERT_TRUE(m.TryLockFor(10ms).value());
  EXPECT_EQ(m.hold_count(), 3u);
  EXPECT_EQ(m.token(), token);
  EXPECT_EQ(LockKeys(url_, name).size(), 1u) << "a nested hold reached etcd";
  // Another thread of the same client is another holder.
  std::thread other([&] {
    Mutex m2 = a.NewMutex(name);
    Result<bool> got = m2.TryLock();
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_FALSE(*got);
  });
  other.join();
  EXPECT_TRUE(m.Unlock().ok());
  EXPECT_TRUE(m.Unlock().ok());
  Mutex mb = b.NewMutex(name);
  EXPECT_FALSE(mb.TryLock().value());
  EXPECT_TRUE(m.Unlock().ok());
  EXPECT_TRUE(mb.TryLock().value());
  EXPECT_TRUE(mb.Unlock().ok());
}

TEST_F(EtcdBackendTest, ReleaseWakesTheBlockedWaiterQuickly) {
  Client a = Connect();
  Client b = Connect();
  const std::string name = UniqueName("wake");
  Mutex ma = a.NewMutex(name);
  ASSERT_TRUE(ma.Lock().ok());
  std::atomic<int64_t> woke_after_us{-1};
  std::atomic<int64_t> released_ns{0};
  std::thread waiter([&] {
    Mutex mb = b.NewMutex(name);
    Status s = mb.Lock();
    int64_t now = Clock::now().time_since_epoch().count();
    woke_after_us = (now - released_ns.load()) / 1000;
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(mb.Unlock().ok());
  });
  Clock::time_point until = Clock::now() + 5s;
  while (LockKeys(url_, name).size() < 2 && Clock::now() < until) {
    std::this_thread::sleep_for(10ms);
  }
  std::this_thread::sleep_for(100ms);  // the waiter is now in its watch
  released_ns = Clock::now().time_since_epoch().count();
  ASSERT_TRUE(ma.Unlock().ok());
  waiter.join();
  EXPECT_GE(woke_after_us.load(), 0);
  // A delete event and one range: milliseconds on loopback.
  EXPECT_LT(woke_after_us.load(), 500'000) << "woke " << woke_after_us.load() << " us after";
}

TEST_F(EtcdBackendTest, CloseRevokesTheLeaseAndItsKeys) {
  Client b = Connect();
  const std::string name = UniqueName("close");
  std::optional<Client> a = Connect();
  Mutex ma = a->NewMutex(name);
  ASSERT_TRUE(ma.Lock().ok());
  ASSERT_EQ(LockKeys(url_, name).size(), 1u);
  EXPECT_TRUE(a->Close().ok());
  EXPECT_TRUE(LockKeys(url_, name).empty());
  EXPECT_EQ(ma.Lock().code(), StatusCode::kSessionLost);
  Mutex mb = b.NewMutex(name);
  EXPECT_TRUE(mb.TryLock().value());
  EXPECT_TRUE(mb.Unlock().ok());
}

TEST_F(EtcdBackendTest, RevokedLeaseIsASessionLoss) {
  Client a = Connect(3s);
  testing::SessionLossWatch watch(a);
  const std::string name = UniqueName("revoked");
  Mutex m = a.NewMutex(name);
  ASSERT_TRUE(m.Lock().ok());
  // Someone (an operator, etcdctl lease revoke) ends the lease under us.
  EtcdCall(url_, "/v3/lease/revoke", "{\"ID\":\"" + std::to_string(a.SessionId()) + "\"}");
  EXPECT_TRUE(LockKeys(url_, name).empty());
  // The next keepalive (every TTL/3) finds it gone.
  ASSERT_TRUE(watch.WaitLost(5s));
  EXPECT_EQ(watch.why().code(), StatusCode::kSessionLost);
  EXPECT_NE(watch.why().message().find("lease"), std::string::npos) << watch.why().message();
  EXPECT_EQ(m.Unlock().code(), StatusCode::kSessionLost);
  EXPECT_EQ(m.Lock().code(), StatusCode::kSessionLost);
}

TEST_F(EtcdBackendTest, FailsOverPastADeadMember) {
  // A port nothing listens on: take one and close it.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  int dead_port = ntohs(addr.sin_port);
  ::close(fd);
  std::string url = "etcd://127.0.0.1:" + std::to_string(dead_port) + "," +
                    url_.substr(std::string("etcd://").size());
  Client a = Connect(5s, url);
  Mutex m = a.NewMutex(UniqueName("failover"));
  EXPECT_TRUE(m.Lock().ok());
  EXPECT_GT(m.token(), 0u);
  EXPECT_TRUE(m.Unlock().ok());
}

TEST_F(EtcdBackendTest, KilledHolderProcessIsReleasedByLeaseExpiry) {
  const std::string name = UniqueName("killed");
  testing::HolderProcess holder;
  Status started = holder.Start(url_, name, 2s, 20s);
  ASSERT_TRUE(started.ok()) << started.ToString();
  Clock::time_point until = Clock::now() + 20s;
  ASSERT_EQ(LockKeys(url_, name).size(), 1u);
  Client other = Connect();
  Mutex m = other.NewMutex(name);
  Result<bool> got = false;
  Clock::time_point killed;
  Clock::time_point granted;
  std::thread waiter([&] {
    got = m.TryLockFor(20s);
    granted = Clock::now();
    if (got.ok() && *got) {
      EXPECT_TRUE(m.Unlock().ok());  // the holding thread unlocks
    }
  });
  while (LockKeys(url_, name).size() < 2 && Clock::now() < until) {
    std::this_thread::sleep_for(10ms);
  }
  holder.Kill();
  killed = Clock::now();
  waiter.join();
  auto after = granted - killed;
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(*got) << "the dead holder's lock was never released";
  // The lease is 2 s (etcd's minimum with default timings); etcd checks for
  // expired leases every 500 ms.
  EXPECT_GT(after, 500ms) << "released before its lease could have expired";
  EXPECT_LT(after, 5s);
}

TEST(EtcdClusterTest, SurvivesTheLossOfTheMemberItTalksTo) {
  ExternalServer cluster("etcd3");
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  ASSERT_EQ(cluster.pids().size(), 3u);
  ClientOptions options;
  options.session_ttl = 5s;
  options.op_timeout = 3s;
  options.connect_timeout = 500ms;
  Result<Client> ca = Client::Connect(cluster.url(), options);
  Result<Client> cb = Client::Connect(cluster.url(), options);
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  ASSERT_TRUE(cb.ok()) << cb.status().ToString();
  Client a = std::move(ca).value();
  Client b = std::move(cb).value();
  std::atomic<bool> lost{false};
  a.OnSessionLost([&](const Status&) { lost = true; });
  b.OnSessionLost([&](const Status&) { lost = true; });
  Mutex ma = a.NewMutex("ha");
  ASSERT_TRUE(ma.Lock().ok());
  uint64_t first_token = ma.token();
  // b waits (watching on the first member, where both clients start).
  std::atomic<bool> b_got{false};
  uint64_t b_token = 0;
  std::thread waiter([&] {
    Mutex mb = b.NewMutex("ha");
    Status s = mb.Lock();
    EXPECT_TRUE(s.ok()) << s.ToString();
    b_token = mb.token();
    b_got = true;
    EXPECT_TRUE(mb.Unlock().ok());
  });
  std::this_thread::sleep_for(300ms);
  ASSERT_FALSE(b_got.load());
  ASSERT_EQ(::kill(cluster.pids()[0], SIGKILL), 0);
  ASSERT_TRUE(testing::WaitGone(cluster.pids()[0], 5s));
  // Keepalives move to the other members (a new leader may take an election).
  std::this_thread::sleep_for(options.session_ttl + 1s);
  EXPECT_FALSE(lost.load()) << "a session was lost with a majority of members alive";
  EXPECT_TRUE(a.SessionStatus().ok()) << a.SessionStatus().ToString();
  EXPECT_FALSE(b_got.load()) << "granted while a still held the lock";
  EXPECT_TRUE(ma.Unlock().ok());
  waiter.join();
  EXPECT_TRUE(b_got.load());
  EXPECT_GT(b_token, first_token);
  EXPECT_TRUE(a.Close().ok());
  EXPECT_TRUE(b.Close().ok());
  cluster.Stop(/*hard=*/true);  // a member without its peers is slow to stop
}

TEST(EtcdStopTest, StoppedServerGivesErrorsAndSessionLossWithoutHangs) {
  ExternalServer own("etcd");
  ASSERT_TRUE(own.ok()) << own.error();
  ClientOptions options;
  options.session_ttl = 2s;
  options.op_timeout = 1s;
  options.connect_timeout = 500ms;
  Result<Client> ca = Client::Connect(own.url(), options);
  Result<Client> cb = Client::Connect(own.url(), options);
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  ASSERT_TRUE(cb.ok()) << cb.status().ToString();
  Client a = std::move(ca).value();
  Client b = std::move(cb).value();
  std::atomic<bool> lost{false};
  std::mutex mu;
  Status why;
  Clock::time_point lost_at;
  a.OnSessionLost([&](const Status& s) {
    std::lock_guard lock(mu);
    why = s;
    lost_at = Clock::now();
    lost = true;
  });
  Mutex held = a.NewMutex("held");
  ASSERT_TRUE(held.Lock().ok());
  // b waits forever (Lock) for what a holds: it must end with the session.
  std::atomic<bool> b_done{false};
  Status b_status;
  std::thread blocked([&] {
    Mutex m = b.NewMutex("held");
    b_status = m.Lock();
    b_done = true;
  });
  std::this_thread::sleep_for(300ms);
  ASSERT_FALSE(b_done.load());
  own.Stop(/*hard=*/true);
  Clock::time_point stopped = Clock::now();

  // A call while the server is gone fails within its bounds instead of hanging.
  Mutex other = a.NewMutex("other");
  Result<bool> attempt = other.TryLockFor(500ms);
  EXPECT_LT(Clock::now() - stopped, 5s);
  ASSERT_FALSE(attempt.ok()) << "granted by a stopped server";
  EXPECT_TRUE(attempt.status().code() == StatusCode::kUnavailable ||
              attempt.status().code() == StatusCode::kTimeout ||
              attempt.status().code() == StatusCode::kSessionLost)
      << attempt.status().ToString();

  // The session is declared lost about one TTL after the last renewal.
  Clock::time_point until = stopped + 10s;
  while (!lost.load() && Clock::now() < until) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(lost.load()) << "OnSessionLost never ran";
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(why.code(), StatusCode::kSessionLost);
    EXPECT_LT(lost_at - stopped, options.session_ttl + 1s);
  }
  EXPECT_EQ(a.SessionStatus().code(), StatusCode::kSessionLost);
  EXPECT_EQ(held.token(), 0u);
  EXPECT_EQ(held.Unlock().code(), StatusCode::kSessionLost);
  EXPECT_EQ(other.Lock().code(), StatusCode::kSessionLost);

  // The blocked Lock() of b ends with b's session.
  while (!b_done.load() && Clock::now() < until) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(b_done.load()) << "a blocked Lock() hung after the server stopped";
  blocked.join();
  EXPECT_EQ(b_status.code(), StatusCode::kSessionLost) << b_status.ToString();

  // Connecting to the stopped server fails quickly and says why.
  Clock::time_point start = Clock::now();
  Result<Client> late = Client::Connect(own.url(), options);
  EXPECT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kUnavailable) << late.status().ToString();
  EXPECT_LT(Clock::now() - start, 3s);
  EXPECT_TRUE(a.Close().ok());  // already lost: OK
}

}  // namespace
}  // namespace tumbler
