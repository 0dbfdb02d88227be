// Checks the security wiring of a rendered chart (issue 17), container by container:
//   - no secret on a command line or in the environment: no `--join_token=VALUE` flag, no env var
//     from a Secret, no env var whose name mentions a token or key;
//   - with a token (default): every Syncopate container passes --join_token_file and mounts it from
//     the named Secret (key -> file `token`, mode 0440); --generated-token: the chart renders that
//     Secret itself, with a random 64-character token;
//   - with --tls-secret: every container passes all four TLS flags and mounts the Secret's three
//     keys, and every gRPC probe is `syncopate health` with the same flags (Kubernetes' own gRPC
//     probe cannot present a client certificate);
//   - --no-token: no token flag, volume or Secret anywhere.
//   node security_check.cjs TOOLS_DIR FILE [--token-secret=NAME [--generated-token]] [--no-token]
//                          [--tls-secret=NAME --tls-server-name=NAME]
"use strict";
const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

const [toolsDir, file, ...rest] = process.argv.slice(2);
const opt = Object.fromEntries(rest.map((a) => {
  const [k, v] = a.replace(/^--/, "").split("=");
  return [k, v === undefined ? true : v];
}));
const YAML = createRequire(path.join(path.resolve(toolsDir), "package.json"))("yaml");
const objects = YAML.parseAllDocuments(fs.readFileSync(file, "utf8")).map((d) => d.toJS()).filter((o) => o && o.kind);

let failures = 0;
function fail(message) { console.log(`FAIL  ${message}`); failures++; }

const templates = [];
for (const o of objects) {
  const t = ["Deployment", "StatefulSet", "Job", "DaemonSet"].includes(o.kind) ? o.spec.template : o.kind === "Pod" ? o : null;
  if (t) templates.push({ name: `${o.kind}/${o.metadata.name}`, spec: t.spec });
}
if (templates.length === 0) fail("no pod templates rendered");

const TLS_FLAGS = (name) => ["--tls_cert=/etc/syncopate/tls/tls.crt", "--tls_key=/etc/syncopate/tls/tls.key",
  "--tls_ca=/etc/syncopate/tls/ca.crt", `--tls_server_name=${name}`];
let containers = 0;
for (const t of templates) {
  const volumes = Object.fromEntries((t.spec.volumes || []).map((v) => [v.name, v]));
  for (const c of [...(t.spec.initContainers || []), ...t.spec.containers]) {
    if (!String(c.image).includes("syncopate")) continue;
    containers++;
    const id = `${t.name} container ${c.name}`;
    const argv = [...(c.command || []), ...(c.args || [])];
    const line = argv.join(" ");
    if (/--join_token=/.test(line)) fail(`${id}: a token value on the command line: ${line}`);
    for (const e of (c.env || [])) {
      if (e.valueFrom && e.valueFrom.secretKeyRef) fail(`${id}: env ${e.name} comes from a Secret`);
      if (/TOKEN|KEY|SECRET|PASSWORD/i.test(e.name)) fail(`${id}: env ${e.name} looks like a secret`);
    }
    if (c.envFrom && c.envFrom.some((e) => e.secretRef)) fail(`${id}: envFrom a Secret`);
    const mounts = Object.fromEntries((c.volumeMounts || []).map((m) => [m.name, m]));
    // A container that runs a Syncopate binary (not a shell one-off) must carry the flags.
    // Members need the token; `syncopate status` and `health` (GetStatus, the health service) do
    // not, but need the certificate under mTLS like everyone else.
    const member = /(^|[\s'"])syncopate-(coordinator|shard|worker)(\s|$)/.test(line);
    const runsBinary = member || /(^|[\s'"(])syncopate (status|health)(\s|$)/.test(line);
    if (opt["token-secret"] && member) {
      if (!argv.some((a) => a === "--join_token_file=/etc/syncopate/join-token/token") && !/--join_token_file=\/etc\/syncopate\/join-token\/token/.test(line)) {
        fail(`${id}: no --join_token_file=/etc/syncopate/join-token/token in: ${line}`);
      }
      const m = mounts["join-token"];
      if (!m || m.mountPath !== "/etc/syncopate/join-token" || !m.readOnly) fail(`${id}: join-token not mounted read-only at /etc/syncopate/join-token`);
      const v = volumes["join-token"];
      if (!v || !v.secret || v.secret.secretName !== opt["token-secret"]) fail(`${id}: join-token volume is not Secret ${opt["token-secret"]}`);
      else {
        if (v.secret.defaultMode !== 0o440) fail(`${id}: join-token mode ${v.secret.defaultMode}, want 0440 (288)`);
        if (!(v.secret.items || []).some((i) => i.path === "token")) fail(`${id}: join-token volume has no item 'token'`);
      }
    }
    if (opt["no-token"]) {
      if (/--join_token/.test(line)) fail(`${id}: token flag despite the opt-out: ${line}`);
      if (mounts["join-token"] || volumes["join-token"]) fail(`${id}: join-token volume despite the opt-out`);
    }
    if (opt["tls-secret"] && runsBinary) {
      for (const flag of TLS_FLAGS(opt["tls-server-name"])) if (!line.includes(flag)) fail(`${id}: missing ${flag}`);
      const v = volumes["tls"];
      if (!v || !v.secret || v.secret.secretName !== opt["tls-secret"]) fail(`${id}: tls volume is not Secret ${opt["tls-secret"]}`);
      else {
        const keys = (v.secret.items || []).map((i) => i.key).sort().join(",");
        if (keys !== "ca.crt,tls.crt,tls.key") fail(`${id}: tls volume items ${keys}`);
      }
      if (!mounts["tls"] || mounts["tls"].mountPath !== "/etc/syncopate/tls") fail(`${id}: tls not mounted at /etc/syncopate/tls`);
      for (const kind of ["livenessProbe", "readinessProbe", "startupProbe"]) {
        const probe = c[kind];
        if (!probe) continue;
        if (probe.grpc) fail(`${id}: ${kind} is a plain gRPC probe (no client certificate) under mTLS`);
        if (probe.exec) {
          const cmd = probe.exec.command.join(" ");
          for (const flag of TLS_FLAGS(opt["tls-server-name"])) if (!cmd.includes(flag)) fail(`${id}: ${kind} lacks ${flag}`);
        }
      }
    }
  }
}
if (containers === 0) fail("no Syncopate containers found");

const secrets = objects.filter((o) => o.kind === "Secret");
if (opt["generated-token"]) {
  const s = secrets.find((o) => o.metadata.name === opt["token-secret"]);
  if (!s) fail(`no Secret ${opt["token-secret"]} rendered`);
  else {
    const token = Buffer.from(s.data.token || "", "base64").toString();
    if (!/^[A-Za-z0-9]{64}$/.test(token)) fail(`generated token is not 64 alphanumerics: '${token}'`);
  }
} else if (secrets.length > 0) {
  fail(`Secrets rendered although none should be: ${secrets.map((o) => o.metadata.name).join(", ")}`);
}

console.log(failures === 0 ? `security_check: ${containers} containers ok` : `security_check: ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
