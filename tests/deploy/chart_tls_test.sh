#!/usr/bin/env bash
# Scenario: the chart's TLS path is real. A certificate made exactly as the chart README's
# cert-manager example makes it (a private CA; one ECDSA P-256 certificate for the release's full
# name, server + client auth; a Secret's keys tls.crt, tls.key, ca.crt) and the chart rendered with
# tls.enabled and the default join token; then the rendered coordinator, shard, worker and
# evaluator commands run as real processes on loopback with every security flag exactly as
# rendered (only in-cluster addresses and mount paths are mapped to local ones). The job trains to
# JOB_DONE over mTLS on every link, the rendered readiness probe (`syncopate health` with the
# certificate) passes against the coordinator and the shard, and NOTES' `syncopate status`
# command works; a client without a certificate, with a certificate of another CA or checking
# another name is refused; so are a rendered worker without the join token and a rendered shard
# with a wrong one (UNAUTHENTICATED, counted). Then the batch semantics of the rendered flags: a worker started after
# the end exits 0, and the coordinator exits 0 after lingering, its summary in the termination
# message.
#   tests/deploy/chart_tls_test.sh BIN_DIR [REPO_ROOT]      (~60 s: 40 s of it the linger)
set -euo pipefail
BIN="$(cd "$1" && pwd)"
ROOT="$(cd "${2:-$(dirname "${BASH_SOURCE[0]}")/../..}" && pwd)"
TOOLS="$("$ROOT/tests/deploy/k8s_tools.sh")"
HELM="$TOOLS/layer/helm/helm"
tmp="$(mktemp -d)"
pids=()
cleanup() {
  set +e
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$tmp"/logs/*.log; do [[ -f $f ]] && { echo "--- $f"; tail -n 15 "$f"; }; done >&2; exit 1; }
export PATH="$BIN:$PATH"

release=mnist
name="$release-syncopate"   # tls.serverName's default: the release's full name

# The certificate, as cert-manager's CA issuer would make it from the README's Certificate.
mounts="$tmp/etc"
mkdir -p "$mounts/tls" "$mounts/join-token" "$mounts/job" "$tmp/state/coordinator" \
  "$tmp/state/checkpoints" "$tmp/logs" "$tmp/other"
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
openssl req -x509 "${ec[@]}" -keyout "$tmp/ca.key" -out "$mounts/tls/ca.crt" -days 2 \
  -subj /CN=syncopate-ca -addext basicConstraints=critical,CA:TRUE 2>/dev/null
openssl req -new "${ec[@]}" -keyout "$mounts/tls/tls.key" -out "$tmp/node.csr" -subj "/CN=$name" 2>/dev/null
printf 'subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n' \
  "$name" >"$tmp/node.ext"
openssl x509 -req -in "$tmp/node.csr" -CA "$mounts/tls/ca.crt" -CAkey "$tmp/ca.key" -CAcreateserial \
  -days 2 -out "$mounts/tls/tls.crt" -extfile "$tmp/node.ext" 2>/dev/null
# Another CA's certificate for the same name: must be refused.
openssl req -x509 "${ec[@]}" -keyout "$tmp/other/tls.key" -out "$tmp/other/tls.crt" -days 2 \
  -subj "/CN=$name" -addext "subjectAltName=DNS:$name" 2>/dev/null

# A small job (the chart's job.spec), rendered with TLS on and the default (generated) join token.
cat >"$tmp/values.yaml" <<EOF
tls: {enabled: true, secretName: $name-tls}
workers: {replicas: 1}
shards: {replicas: 1}
# Everything after JOB_DONE (refused clients, rogue processes, the late worker) needs the
# coordinator still serving: measured ~10 s of it on a loaded 2-core machine, so 40 s of margin.
coordinator: {lingerSeconds: 40}
job:
  spec: |
    job_id: "chart-tls"
    model { kind: MLP hidden: [32] }
    dataset { kind: FASHION_MNIST dir: "/usr/share/datasets/fashion-mnist" train_limit: 10000 test_limit: 1000 }
    optimizer { kind: MOMENTUM learning_rate: 0.05 momentum: 0.9 }
    global_batch: 128
    mode: MODE_SYNC
    stop { epochs: 3 }
    block_size: 500
    eval { interval_seconds: 1 }
EOF
"$HELM" template "$release" "$ROOT/helm/syncopate" -f "$tmp/values.yaml" >"$tmp/rendered.yaml" \
  2> >(grep -v 'found symbolic link' >&2)
# The generated token Secret's value, as the kubelet would mount it.
node -e '
  const YAML = require(process.argv[1] + "/node_modules/yaml");
  const s = YAML.parseAllDocuments(require("fs").readFileSync(process.argv[2], "utf8")).map((d) => d.toJS())
    .find((o) => o && o.kind === "Secret");
  process.stdout.write(Buffer.from(s.data.token, "base64").toString());' "$TOOLS" "$tmp/rendered.yaml" \
  >"$mounts/join-token/token"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
node "$ROOT/tests/deploy/rendered_commands.cjs" "$TOOLS" "$tmp/rendered.yaml" "$mounts" "$tmp/state" \
  "127.0.0.1:$port" >"$tmp/commands.json"
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job"], end="")' "$tmp/commands.json" \
  >"$mounts/job/job.textproto"

# Runs component $1 as rendered (argv from the JSON), in the background, logging to logs/$1.log.
start() {
  local component="$1" pod
  mapfile -t argv < <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["components"][sys.argv[2]]["argv"]))' \
    "$tmp/commands.json" "$component")
  pod="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["components"][sys.argv[2]]["podName"])' \
    "$tmp/commands.json" "$component")"
  [[ ${#argv[@]} -gt 0 ]] || fail "no rendered command for $component"
  # A pattern match, not `printf | grep -q`: under pipefail, grep -q quitting at its first match
  # can leave printf writing into a closed pipe, and the pipeline then fails (seen once).
  [[ " ${argv[*]} " == *" --tls_server_name="* ]] || fail "$component: no TLS flags rendered"
  (cd "$tmp/state" && POD_NAME="$pod" exec "${argv[@]}") >"$tmp/logs/$component.log" 2>&1 &
  pids+=($!)
}
probe() {  # the rendered readiness probe of component $1, against port $2
  mapfile -t cmd < <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["components"][sys.argv[2]]["probe"]))' \
    "$tmp/commands.json" "$1")
  cmd=("${cmd[@]/--address=127.0.0.1:[0-9]*/--address=127.0.0.1:$2}")
  "${cmd[@]}"
}

start coordinator
for _ in $(seq 1 100); do grep -q 'serving on port' "$tmp/logs/coordinator.log" && break; sleep 0.1; done
grep -q 'mTLS, join token required' "$tmp/logs/coordinator.log" || fail "coordinator not serving with mTLS and a token"
probe coordinator "$port" >/dev/null || fail "the rendered readiness probe fails against the coordinator"
start shard
for _ in $(seq 1 100); do grep -q 'serving on port' "$tmp/logs/shard.log" && break; sleep 0.1; done
shard_port="$(sed -n 's/.*shard 0 serving on port \([0-9]*\),.*/\1/p' "$tmp/logs/shard.log")"
[[ -n $shard_port ]] && grep -q 'mTLS, join token required' "$tmp/logs/shard.log" || fail "shard not serving with mTLS"
probe shard "$shard_port" >/dev/null || fail "the rendered readiness probe fails against the shard"
# The evaluator first: the job starts the moment its one worker joins.
start evaluator
for _ in $(seq 1 100); do grep -q 'hello from evaluator' "$tmp/logs/coordinator.log" && break; sleep 0.1; done
start worker

# NOTES' status command: `syncopate status` plus the chart's TLS flags.
tls_flags=(--tls_cert="$mounts/tls/tls.crt" --tls_key="$mounts/tls/tls.key" --tls_ca="$mounts/tls/ca.crt"
           --tls_server_name="$name")
deadline=$((SECONDS + 120))
until syncopate status --coordinator="127.0.0.1:$port" "${tls_flags[@]}" >"$tmp/status.txt" 2>&1 &&
      grep -q 'JOB_DONE' "$tmp/status.txt" && grep -q '(final)' "$tmp/status.txt"; do
  ((SECONDS < deadline)) || fail "no JOB_DONE after 120 s: $(cat "$tmp/status.txt")"
  sleep 1
done
grep -q 'refused' "$tmp/logs/coordinator.log" && fail "the coordinator refused a rendered member"
expect_refused() {  # expect_refused WHAT FLAGS...: status must fail
  if syncopate status --coordinator="127.0.0.1:$port" "$@" >"$tmp/refused.txt" 2>&1; then
    fail "$1 was let in: $(cat "$tmp/refused.txt")"
  fi
}
expect_refused "a plaintext client"
expect_refused "a client without a certificate" --tls_ca="$mounts/tls/ca.crt" --tls_server_name="$name"
expect_refused "another CA's certificate" --tls_cert="$tmp/other/tls.crt" --tls_key="$tmp/other/tls.key" \
  --tls_ca="$mounts/tls/ca.crt" --tls_server_name="$name"
expect_refused "a client checking another name" --tls_cert="$mounts/tls/tls.crt" --tls_key="$mounts/tls/tls.key" \
  --tls_ca="$mounts/tls/ca.crt" --tls_server_name=someone-else
# The chart's join token: a rendered worker without its token file and a rendered shard with a
# wrong token (both with the certificate) are refused with UNAUTHENTICATED, exit 3 (a permanent
# refusal), and counted.
rendered() {  # rendered COMPONENT: the rendered argv, one per line
  python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["components"][sys.argv[2]]["argv"]))' \
    "$tmp/commands.json" "$1"
}
printf 'guess\n' >"$tmp/wrong-token"
expect_token_refusal() {  # expect_token_refusal WHAT EXPECTED ARGV...
  local what="$1" expected="$2" code
  shift 2
  set +e
  (cd "$tmp/state" && timeout 30 "$@") >"$tmp/logs/rogue.log" 2>&1
  code=$?
  set -e
  [[ $code -eq 3 ]] || fail "$what: exit code $code, want 3: $(tail -n 3 "$tmp/logs/rogue.log")"
  grep -q "$expected" "$tmp/logs/rogue.log" || fail "$what: no '$expected': $(tail -n 3 "$tmp/logs/rogue.log")"
}
mapfile -t rogue < <(rendered worker | grep -v -- '--join_token_file=')
expect_token_refusal "a rendered worker without the token" "missing join token" "${rogue[@]}" --name=intruder
mapfile -t rogue < <(rendered shard | sed "s|^--join_token_file=.*|--join_token_file=$tmp/wrong-token|; s|^--checkpoint_dir=.*|--checkpoint_dir=$tmp/rogue-ckpt|")
expect_token_refusal "a rendered shard with a wrong token" "wrong join token" "${rogue[@]}"
metrics_port="$(sed -n 's/.*serving on port [0-9]*, metrics on \([0-9]*\);.*/\1/p' "$tmp/logs/coordinator.log")"
metrics="$(curl -sf "http://127.0.0.1:$metrics_port/metrics")" || fail "cannot scrape the coordinator"
for session in worker shard; do
  grep -q "^syncopate_coordinator_rejections_total{reason=\"unauthenticated\",session=\"$session\"} 1\$" <<<"$metrics" ||
    fail "the $session refusal was not counted: $(grep rejections_total <<<"$metrics")"
done
# Batch semantics (ADR 0006): a worker that arrives after the end has nothing to do and exits 0;
# the coordinator serves the final status for lingerSeconds, then exits 0 with its summary in the
# termination message.
start worker
late=${pids[-1]}
for _ in $(seq 1 100); do kill -0 "$late" 2>/dev/null || break; sleep 0.1; done
kill -0 "$late" 2>/dev/null && fail "a worker started after the job ended is still running"
wait "$late" || fail "a worker started after the job ended exited $?: $(tail -n 3 "$tmp/logs/worker.log")"
grep -q 'the job has finished: nothing to do' "$tmp/logs/worker.log" || fail "the late worker did not say why it left"
coordinator_pid=${pids[0]}
for _ in $(seq 1 600); do kill -0 "$coordinator_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$coordinator_pid" 2>/dev/null && fail "the coordinator still runs 60 s after the late worker (lingerSeconds 40)"
wait "$coordinator_pid" || fail "the coordinator exited $? after lingering"
grep -q '^job chart-tls JOB_DONE after .* final evaluation: accuracy' "$tmp/state/termination-log" ||
  fail "termination message: '$(cat "$tmp/state/termination-log" 2>/dev/null)'"
accuracy="$(sed -n 's/^last evaluation: accuracy \([0-9.]*\)%.*/\1/p' "$tmp/status.txt")"
awk -v a="$accuracy" 'BEGIN { exit !(a > 50) }' || fail "final accuracy '$accuracy' not above 50%"

echo "chart_tls_test: passed (JOB_DONE over mTLS, final accuracy ${accuracy}%; 4 strangers refused at the handshake, 2 without the token; a late worker and the coordinator exited 0)"
