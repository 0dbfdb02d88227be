// Extracts what a rendered chart runs, for tests that run it as real processes on loopback
// (chart_tls_test.sh): per component (coordinator, shard, worker, evaluator) the container's argv
// (command + args) and its readiness probe's exec command, plus the job ConfigMap's job.textproto.
// In-cluster names are rewritten to loopback: /etc/syncopate/* -> MOUNTS/*, the coordinator's
// service address -> COORDINATOR, --listen -> 127.0.0.1:0 (the coordinator: COORDINATOR's port),
// --metrics_listen -> 127.0.0.1:0, --advertise_host -> 127.0.0.1, /var/lib/syncopate -> STATE,
// the termination message /dev/termination-log -> STATE/termination-log.
// Nothing else changes: every security flag is used exactly as rendered.
//   node rendered_commands.cjs TOOLS_DIR FILE MOUNTS STATE COORDINATOR   -> JSON on stdout
"use strict";
const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

const [toolsDir, file, mounts, state, coordinator] = process.argv.slice(2);
const YAML = createRequire(path.join(path.resolve(toolsDir), "package.json"))("yaml");
const objects = YAML.parseAllDocuments(fs.readFileSync(file, "utf8")).map((d) => d.toJS()).filter((o) => o && o.kind);

const coordinatorPort = coordinator.split(":").pop();
function rewrite(arg) {
  return arg
    .replace(/^--metrics_listen=.*$/, "--metrics_listen=127.0.0.1:0")
    .replace(/^--coordinator=.*$/, `--coordinator=${coordinator}`)
    .replace(/^--advertise_host=.*$/, "--advertise_host=127.0.0.1")
    .replace(/\/etc\/syncopate\//g, `${mounts}/`)
    .replace(/^--final_status_file=\/dev\/termination-log$/, `--final_status_file=${state}/termination-log`)
    .replace(/\/var\/lib\/syncopate/g, state);
}

const out = { components: {} };
for (const o of objects) {
  if (o.kind === "ConfigMap" && o.data && o.data["job.textproto"]) out.job = o.data["job.textproto"];
  const template = ["Deployment", "StatefulSet", "Job"].includes(o.kind) ? o.spec.template : null;
  if (!template) continue;
  const component = template.metadata.labels["app.kubernetes.io/component"];
  const c = template.spec.containers[0];
  // Kubernetes' $(VAR) expansion of the downward-API variables the chart uses.
  const podName = `${o.metadata.name}-0`;
  const expand = (a) => a.replace(/\$\(POD_NAME\)/g, podName).replace(/\$\(POD_NAMESPACE\)/g, "default");
  const argv = [...(c.command || []), ...(c.args || [])].map(expand).map(rewrite).map((a) =>
    /^--listen=/.test(a) ? (component === "coordinator" ? `--listen=127.0.0.1:${coordinatorPort}` : "--listen=127.0.0.1:0") : a);
  const probe = c.readinessProbe && c.readinessProbe.exec ? c.readinessProbe.exec.command.map(rewrite) : null;
  out.components[component] = { argv, probe, podName };
}
process.stdout.write(JSON.stringify(out, null, 1));
