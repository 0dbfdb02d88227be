// mTLS and the join token on real processes, with certificates made by `openssl` at test time.
#include "libs/rpc/security.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "libs/rpc/grpc_util.h"
#include "libs/worker/coordinator_session.h"
#include "libs/worker/parameter_client.h"
#include "tests/integration/cluster_test_util.h"

namespace syncopate {
namespace {

using testing::MetricValue;
using testing::ScrapeMetrics;
using testing::SmallJob;
using testing::WaitFor;

// Runs a shell command; returns its exit status (0 = success).
int Run(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()); }

// A test PKI in `dir`: ca.pem signs node.pem (SAN 127.0.0.1 and localhost, usable as server
// and client); rogue.pem is a self-signed look-alike no Syncopate CA vouches for.
void MakePki(const std::string& dir) {
  ASSERT_EQ(Run("mkdir -p " + dir), 0);
  const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  ASSERT_EQ(Run(absl::StrCat("cd ", dir, " && openssl req -x509 ", ec,
                             " -keyout ca.key -out ca.pem -days 2 -subj /CN=syncopate-test-ca")),
            0);
  {
    std::ofstream ext(dir + "/node.ext");
    ext << "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
           "extendedKeyUsage=serverAuth,clientAuth\n";
  }
  ASSERT_EQ(Run(absl::StrCat("cd ", dir, " && openssl req -new ", ec,
                             " -keyout node.key -out node.csr -subj /CN=syncopate-node")),
            0);
  ASSERT_EQ(Run(absl::StrCat("cd ", dir,
                             " && openssl x509 -req -in node.csr -CA ca.pem -CAkey ca.key "
                             "-CAcreateserial -out node.pem -days 2 -extfile node.ext")),
            0);
  ASSERT_EQ(Run(absl::StrCat("cd ", dir, " && openssl req -x509 ", ec,
                             " -keyout rogue.key -out rogue.pem -days 2 -subj /CN=syncopate-node "
                             "-addext subjectAltName=IP:127.0.0.1")),
            0);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

grpc::Status GetStatus(const std::string& address, const rpc::TransportSecurity& security) {
  auto stub = v1::Coordinator::NewStub(rpc::CreateChannel(address, security));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::ClusterStatus status;
  return stub->GetStatus(&context, v1::GetStatusRequest(), &status);
}

// The HTTP status line `request` (e.g. "DELETE /metrics") gets from a metrics port.
std::string HttpStatusLine(int port, const std::string& request) {
  const std::string reply = testing::HttpRequest(port, request);
  return reply.substr(0, reply.find("\r\n"));
}

// Scenario: a cluster with mTLS and a join token on every link trains to completion, while
// peers without a certificate, with a certificate from another CA, or with a wrong or missing
// token are refused (UNAVAILABLE at the handshake, UNAUTHENTICATED on the session), logged and
// counted; the metrics endpoints answer GET only.
TEST(Security, MutualTlsAndJoinTokenAdmitMembersAndRefuseStrangers) {
  // 10 epochs, paced to >= 9.4 s on any machine (testing::kPacedStep): the probes below need
  // the job still running. Unpaced, one epoch trained in ~0.5 s, and in CI the first status
  // showing a version came after the job had finished and its workers had left the membership
  // (SIGSEGV reading worker_ids(0) of an empty list).
  v1::JobSpec job = SmallJob(v1::MODE_SYNC, 2, 2, 10);
  launch::LocalClusterOptions options = testing::PacedOptions(job, "security");
  const std::string pki = options.run_dir + "/pki";
  MakePki(pki);
  if (HasFatalFailure()) return;
  options.tls.cert_file = pki + "/node.pem";
  options.tls.key_file = pki + "/node.key";
  options.tls.ca_file = pki + "/ca.pem";
  options.join_token = "s3cret-join-token";
  absl::StatusOr<rpc::TransportSecurity> member = rpc::LoadTransportSecurity(options.tls);
  ASSERT_TRUE(member.ok()) << member.status();
  auto cluster = launch::LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto running = WaitFor(
      **cluster,
      [](const v1::ClusterStatus& s) {
        return s.state() == v1::JOB_RUNNING && s.shards_size() > 0 && s.shards(0).version() > 0 &&
               s.membership().worker_ids_size() > 0;
      },
      absl::Seconds(60));
  ASSERT_TRUE(running.ok()) << running.status();
  const int32_t member_id = running->membership().worker_ids(0);
  const std::string coordinator = (*cluster)->coordinator_address();

  // No TLS at all, TLS without a client certificate, a certificate from another CA: the
  // handshake fails, so the client sees UNAVAILABLE.
  EXPECT_EQ(GetStatus(coordinator, {}).error_code(), grpc::StatusCode::UNAVAILABLE);
  rpc::TransportSecurity no_cert;
  no_cert.ca_pem = member->ca_pem;
  EXPECT_EQ(GetStatus(coordinator, no_cert).error_code(), grpc::StatusCode::UNAVAILABLE);
  rpc::TransportSecurity rogue = *member;
  rogue.cert_pem = ReadAll(pki + "/rogue.pem");
  rogue.key_pem = ReadAll(pki + "/rogue.key");
  EXPECT_EQ(GetStatus(coordinator, rogue).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(GetStatus(coordinator, *member).ok());

  // A valid certificate but a wrong or missing token: UNAUTHENTICATED on the session.
  v1::WorkerHello hello;
  hello.set_name("intruder");
  hello.set_role(v1::ROLE_WORKER);
  hello.set_join_token("guess");
  auto wrong = worker::CoordinatorSession::Open(coordinator, hello, absl::Seconds(10), *member);
  EXPECT_TRUE(absl::IsUnauthenticated(wrong.status())) << wrong.status();
  hello.clear_join_token();
  auto missing = worker::CoordinatorSession::Open(coordinator, hello, absl::Seconds(10), *member);
  EXPECT_TRUE(absl::IsUnauthenticated(missing.status())) << missing.status();

  v1::ShardEndpoint endpoint;
  endpoint.set_shard_id(0);
  endpoint.set_address(running->shards(0).address());
  worker::ShardConnection shard(endpoint, {.worker_id = member_id,
                                           .role = v1::ROLE_WORKER,
                                           .join_token = "guess",
                                           .security = *member});
  absl::Status train = shard.Connect(absl::Seconds(10));
  EXPECT_TRUE(absl::IsUnauthenticated(train)) << train;
  const std::string shard_metrics = ScrapeMetrics((*cluster)->metrics_ports().at("shard-0"));
  EXPECT_EQ(MetricValue(shard_metrics,
                        "syncopate_shard_rejections_total{reason=\"unauthenticated\",shard=\"0\"}"),
            1)
      << shard_metrics;
  // With the right token the same certificate is welcome on the shard.
  worker::ShardConnection good(endpoint, {.worker_id = member_id,
                                          .role = v1::ROLE_EVALUATOR,
                                          .join_token = options.join_token,
                                          .security = *member});
  EXPECT_TRUE(good.Connect(absl::Seconds(10)).ok());

  // The members trained to the end through all of it.
  auto done = WaitFor(
      **cluster, [](const v1::ClusterStatus& s) { return s.state() == v1::JOB_DONE; },
      absl::Seconds(90));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_GT(done->last_eval().accuracy(), 0.5);

  // Counted...
  const int coordinator_metrics = (*cluster)->metrics_ports().at("coordinator");
  const std::string metrics = ScrapeMetrics(coordinator_metrics);
  EXPECT_EQ(MetricValue(metrics,
                        "syncopate_coordinator_rejections_total{reason="
                        "\"unauthenticated\",session=\"worker\"}"),
            2)
      << metrics;
  // ...and read-only: the metrics endpoint serves GET, nothing else.
  EXPECT_TRUE(absl::StrContains(HttpStatusLine(coordinator_metrics, "GET /metrics"), " 200"));
  for (const char* method : {"POST", "PUT", "DELETE"}) {
    const std::string line = HttpStatusLine(coordinator_metrics, absl::StrCat(method, " /metrics"));
    EXPECT_FALSE(absl::StrContains(line, " 200")) << method << ": " << line;
  }
  (void)(*cluster)->Stop();

  // ...and logged: our refusals, and gRPC's failed handshakes.
  const std::string coordinator_log = ReadAll(options.run_dir + "/logs/coordinator.log");
  EXPECT_TRUE(absl::StrContains(coordinator_log, "refused worker session")) << coordinator_log;
  EXPECT_TRUE(absl::StrContains(coordinator_log, "peer did not return a certificate"))
      << coordinator_log;
  EXPECT_TRUE(absl::StrContains(coordinator_log, "certificate verify failed")) << coordinator_log;
  const std::string shard_log = ReadAll(options.run_dir + "/logs/shard-0.log");
  EXPECT_TRUE(absl::StrContains(shard_log, "refused Train stream")) << shard_log;
}

}  // namespace
}  // namespace syncopate
