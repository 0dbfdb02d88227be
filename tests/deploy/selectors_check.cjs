// Checks the label selectors of a rendered chart against the labels of the pods it renders, the way
// Kubernetes evaluates them (matchLabels and matchExpressions), so a renamed label cannot silently
// leave a Service without endpoints or a port open to everyone:
//   - every Service selects at least one pod template, and each of its targetPorts names a port
//     of every pod it selects;
//   - the NetworkPolicy (when rendered) selects every pod of the release; the rule for the `grpc`
//     ports admits exactly the release's own pods (podSelector only: no namespace, no IP block)
//     and they all match it; the rule for the `metrics` ports admits only peers with a
//     namespaceSelector (Prometheus elsewhere), none of the release's pods; no rule is open to
//     every source or every port; every grpc/metrics port of every pod is covered by a rule;
//   - PodDisruptionBudgets select pods.
//   node selectors_check.cjs TOOLS_DIR RELEASE FILE [--expect-network-policy]
// Prints one line per check; exit 0 iff all pass.
"use strict";
const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

const [toolsDir, release, file, ...flags] = process.argv.slice(2);
if (!toolsDir || !release || !file) {
  console.error("usage: node selectors_check.cjs TOOLS_DIR RELEASE FILE [--expect-network-policy]");
  process.exit(2);
}
const expectPolicy = flags.includes("--expect-network-policy");
const YAML = createRequire(path.join(path.resolve(toolsDir), "package.json"))("yaml");
const objects = YAML.parseAllDocuments(fs.readFileSync(file, "utf8"))
  .map((d) => d.toJS())
  .filter((o) => o && o.kind);

// Pod templates: workload controllers' templates and bare pods (e.g. the helm test hook).
const pods = [];
for (const o of objects) {
  const template = ["Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet"].includes(o.kind)
    ? o.spec.template
    : o.kind === "CronJob"
      ? o.spec.jobTemplate.spec.template
      : o.kind === "Pod"
        ? o
        : null;
  if (!template) continue;
  const ports = {};
  for (const c of (template.spec.containers || [])) {
    for (const p of (c.ports || [])) if (p.name) ports[p.name] = p.containerPort;
  }
  pods.push({ name: `${o.kind}/${o.metadata.name}`, labels: template.metadata.labels || {}, ports });
}

// Kubernetes' LabelSelector semantics (an empty selector matches everything).
function matches(selector, labels) {
  if (!selector) return false;
  for (const [k, v] of Object.entries(selector.matchLabels || {})) if (labels[k] !== v) return false;
  for (const e of (selector.matchExpressions || [])) {
    const has = Object.prototype.hasOwnProperty.call(labels, e.key);
    if (e.operator === "In" && !(has && e.values.includes(labels[e.key]))) return false;
    if (e.operator === "NotIn" && has && e.values.includes(labels[e.key])) return false;
    if (e.operator === "Exists" && !has) return false;
    if (e.operator === "DoesNotExist" && has) return false;
  }
  return true;
}
// A Service's selector is a plain map.
const serviceMatches = (selector, labels) => matches({ matchLabels: selector }, labels);

let failures = 0;
function check(name, ok, detail) {
  console.log(`${ok ? "ok  " : "FAIL"}  ${name}${ok || !detail ? "" : ": " + detail}`);
  if (!ok) failures++;
}

check(`pod templates rendered (${pods.length})`, pods.length > 0);
const releasePods = pods.filter((p) => p.labels["app.kubernetes.io/instance"] === release);
check("every pod template carries app.kubernetes.io/instance=" + release,
  releasePods.length === pods.length, pods.filter((p) => !releasePods.includes(p)).map((p) => p.name).join(", "));

for (const svc of objects.filter((o) => o.kind === "Service")) {
  const selected = pods.filter((p) => serviceMatches(svc.spec.selector, p.labels));
  check(`Service/${svc.metadata.name} selects pods (${selected.map((p) => p.name).join(", ")})`, selected.length > 0);
  for (const port of svc.spec.ports || []) {
    if (typeof port.targetPort !== "string") continue;
    const missing = selected.filter((p) => !(port.targetPort in p.ports));
    check(`Service/${svc.metadata.name} targetPort ${port.targetPort} exists on every selected pod`,
      missing.length === 0, missing.map((p) => p.name).join(", "));
  }
}

for (const pdb of objects.filter((o) => o.kind === "PodDisruptionBudget")) {
  const selected = pods.filter((p) => matches(pdb.spec.selector, p.labels));
  check(`PodDisruptionBudget/${pdb.metadata.name} selects pods (${selected.map((p) => p.name).join(", ")})`,
    selected.length > 0);
}

const policies = objects.filter((o) => o.kind === "NetworkPolicy");
check(expectPolicy ? "a NetworkPolicy is rendered" : "no NetworkPolicy is rendered",
  expectPolicy ? policies.length > 0 : policies.length === 0);
for (const np of policies) {
  const id = `NetworkPolicy/${np.metadata.name}`;
  const selected = pods.filter((p) => matches(np.spec.podSelector, p.labels));
  check(`${id} selects every pod of the release`, selected.length === releasePods.length,
    releasePods.filter((p) => !selected.includes(p)).map((p) => p.name).join(", "));
  check(`${id} restricts ingress`, (np.spec.policyTypes || []).includes("Ingress"));
  const rules = np.spec.ingress || [];
  for (const [i, rule] of rules.entries()) {
    check(`${id} rule ${i} names its sources`, Array.isArray(rule.from) && rule.from.length > 0);
    check(`${id} rule ${i} names its ports`, Array.isArray(rule.ports) && rule.ports.length > 0);
  }
  const rulesFor = (port) => rules.filter((r) => (r.ports || []).some((p) => p.port === port));
  const grpcRules = rulesFor("grpc");
  check(`${id}: one rule admits the grpc ports`, grpcRules.length === 1);
  for (const rule of grpcRules) {
    const podOnly = rule.from.every((peer) => peer.podSelector && !peer.namespaceSelector && !peer.ipBlock);
    check(`${id}: grpc sources are pod selectors in the release's namespace only`, podOnly);
    const admitted = pods.filter((p) => rule.from.some((peer) => matches(peer.podSelector, p.labels)));
    check(`${id}: every pod of the release may reach the grpc ports`, admitted.length === releasePods.length,
      releasePods.filter((p) => !admitted.includes(p)).map((p) => p.name).join(", "));
    const foreign = { ...releasePods[0].labels, "app.kubernetes.io/instance": release + "-other" };
    check(`${id}: pods of another release may not`,
      !rule.from.some((peer) => matches(peer.podSelector, foreign)));
  }
  const metricsRules = rulesFor("metrics");
  check(`${id}: a rule admits the metrics ports`, metricsRules.length > 0);
  for (const rule of metricsRules) {
    for (const peer of rule.from) {
      if (peer.ipBlock) continue;  // an explicit extraIngress choice
      check(`${id}: metrics sources select another namespace (${JSON.stringify(peer)})`, !!peer.namespaceSelector);
      const own = releasePods.filter((p) => !peer.namespaceSelector && matches(peer.podSelector, p.labels));
      check(`${id}: metrics sources admit none of the release's pods`, own.length === 0);
    }
  }
  for (const p of selected) {
    for (const name of Object.keys(p.ports)) {
      if (name !== "grpc" && name !== "metrics") continue;
      check(`${id}: ${p.name} port ${name} is covered by a rule`, rulesFor(name).length > 0);
    }
  }
}

console.log(failures === 0 ? "selectors_check: all passed" : `selectors_check: ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
