// Checks the chart's scheduling wiring in one rendered file (values gang, kueue, podFailurePolicy,
// per-component priorityClassName and topologySpreadConstraints, nodeLoss tolerations), including the cross-field rules
// the Kubernetes API server applies to podFailurePolicy that no schema expresses
// (pkg/apis/batch/validation): restartPolicy Never, a containerName naming a container of the pod,
// exit code values ascending, without repeats and without 0 under `In`.
//   node scheduling_check.cjs TOOLS_DIR FILE [--gang=volcano|scheduler-plugins --min-member=N]
//        [--queue=NAME] [--pod-failure-policy=CODES] [--priority=COMPONENT=CLASS ...]
//        [--node-loss=SECONDS|none]
// CODES: the exit codes expected to fail each Job, comma-separated (e.g. 2,3). SECONDS: the
// tolerationSeconds of the node-loss tolerations every pod must carry (default 60, the chart's). Without --gang,
// --queue or --pod-failure-policy the check expects that option absent. Prints one
// line per check; exit 0 iff all pass.
"use strict";
const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

const [toolsDir, file, ...flags] = process.argv.slice(2);
if (!toolsDir || !file) {
  console.error("usage: node scheduling_check.cjs TOOLS_DIR FILE [--gang=S --min-member=N] " +
                "[--queue=NAME] [--pod-failure-policy=CODES] [--priority=COMPONENT=CLASS ...]");
  process.exit(2);
}
const flag = (name) => {
  const f = flags.find((x) => x.startsWith(`--${name}=`));
  return f === undefined ? undefined : f.slice(name.length + 3);
};
const gang = flag("gang");
const minMember = Number(flag("min-member"));
const queue = flag("queue");
const failJobCodes = flag("pod-failure-policy");
const podFailurePolicy = failJobCodes !== undefined;
const nodeLoss = flag("node-loss") ?? "60";
const priorities = Object.fromEntries(
  flags.filter((x) => x.startsWith("--priority=")).map((x) => x.slice(11).split("=")));

const YAML = createRequire(path.join(path.resolve(toolsDir), "package.json"))("yaml");
const objects = YAML.parseAllDocuments(fs.readFileSync(file, "utf8"))
  .map((d) => d.toJS())
  .filter((o) => o && o.kind);
const jobs = objects.filter((o) => o.kind === "Job");
const component = (job) => job.metadata.labels["app.kubernetes.io/component"];

let failures = 0;
function check(name, ok, detail) {
  console.log(`${ok ? "ok  " : "FAIL"}  ${name}${ok || !detail ? "" : ": " + detail}`);
  if (!ok) failures++;
}
const names = (list) => list.map((j) => j.metadata.name).join(", ");

check(`Jobs rendered (${jobs.length})`, jobs.length >= 4);

// Gang: one PodGroup, every Job's pods in it through the scheduler's own mark.
const groups = objects.filter((o) => o.kind === "PodGroup");
if (gang) {
  const apiVersion = { volcano: "scheduling.volcano.sh/v1beta1",
                       "scheduler-plugins": "scheduling.x-k8s.io/v1alpha1" }[gang];
  check(`one PodGroup, ${apiVersion}`, groups.length === 1 && groups[0].apiVersion === apiVersion,
    groups.map((g) => g.apiVersion).join(", "));
  const group = groups[0] || { metadata: {}, spec: {} };
  check(`PodGroup minMember = ${minMember}`, group.spec.minMember === minMember,
    `is ${group.spec.minMember}`);
  const member = (t) => gang === "volcano"
    ? (t.metadata.annotations || {})["scheduling.k8s.io/group-name"]
    : (t.metadata.labels || {})["scheduling.x-k8s.io/pod-group"];
  const outside = jobs.filter((j) => member(j.spec.template) !== group.metadata.name);
  check(`every Job's pods name PodGroup ${group.metadata.name}`, outside.length === 0, names(outside));
  const schedulers = new Set(jobs.map((j) => j.spec.template.spec.schedulerName));
  check(`every Job's pods have one schedulerName (${[...schedulers]})`,
    schedulers.size === 1 && !schedulers.has(undefined));
} else {
  check("no PodGroup, no schedulerName", groups.length === 0 &&
    jobs.every((j) => j.spec.template.spec.schedulerName === undefined));
}

// Kueue: the queue label on every Job (not on its pods); suspend left to Kueue's webhook.
const queued = jobs.filter((j) => j.metadata.labels["kueue.x-k8s.io/queue-name"] !== undefined);
if (queue) {
  const wrong = jobs.filter((j) => j.metadata.labels["kueue.x-k8s.io/queue-name"] !== queue);
  check(`every Job labelled kueue.x-k8s.io/queue-name=${queue}`, wrong.length === 0, names(wrong));
} else {
  check("no Job labelled for Kueue", queued.length === 0, names(queued));
}
const podsQueued = jobs.filter(
  (j) => (j.spec.template.metadata.labels || {})["kueue.x-k8s.io/queue-name"] !== undefined);
const suspended = jobs.filter((j) => j.spec.suspend !== undefined);
check("no pod template carries the queue label, no Job sets suspend",
  podsQueued.length === 0 && suspended.length === 0, names(podsQueued.concat(suspended)));

// podFailurePolicy: on every Job but the coordinator's, valid as the API server would judge it.
const withPolicy = jobs.filter((j) => j.spec.podFailurePolicy !== undefined);
const expected = podFailurePolicy ? jobs.filter((j) => component(j) !== "coordinator") : [];
check(`podFailurePolicy on ${podFailurePolicy ? "every Job but the coordinator's" : "no Job"}`,
  names(withPolicy) === names(expected), `on: ${names(withPolicy)}`);
for (const job of jobs) {
  const policy = job.spec.podFailurePolicy;
  const pod = job.spec.template.spec;
  const restart = policy ? "Never" : "OnFailure";
  check(`${job.metadata.name}: restartPolicy ${restart}`, pod.restartPolicy === restart,
    `is ${pod.restartPolicy}`);
  if (!policy) continue;
  const containers = (pod.containers || []).concat(pod.initContainers || []).map((c) => c.name);
  const problems = [];
  const rules = policy.rules || [];
  if (rules.length === 0 || rules.length > 20) problems.push(`${rules.length} rules`);
  rules.forEach((rule, i) => {
    if (!!rule.onExitCodes === !!rule.onPodConditions) problems.push(`rule ${i}: not exactly one of onExitCodes, onPodConditions`);
    const codes = rule.onExitCodes;
    if (codes) {
      if (codes.containerName !== undefined && !containers.includes(codes.containerName)) {
        problems.push(`rule ${i}: containerName ${codes.containerName} is not a container`);
      }
      const v = codes.values || [];
      if (v.length === 0 || v.length > 255) problems.push(`rule ${i}: ${v.length} values`);
      if (v.some((x, k) => k > 0 && x <= v[k - 1])) problems.push(`rule ${i}: values not ascending or repeated`);
      if (codes.operator === "In" && v.includes(0)) problems.push(`rule ${i}: 0 under In`);
    }
  });
  check(`${job.metadata.name}: podFailurePolicy passes the API's cross-field rules`,
    problems.length === 0, problems.join("; "));
  const first = rules[0] || {};
  // An Ignore rule on OWNER's exit CODE: on OWNER's Job before any FailJob, on no other Job.
  const ignoredExit = (owner, code, why) => {
    const at = rules.findIndex((r) => r.action === "Ignore" && r.onExitCodes &&
      r.onExitCodes.containerName === owner && r.onExitCodes.values.join(",") === code);
    const mine = component(job) === owner;
    check(`${job.metadata.name}: ${mine ? `${why} (exit ${code}) is ignored before any FailJob` : `no rule for exit ${code} (a ${owner}'s only)`}`,
      mine ? at > 0 && rules.slice(0, at).every((r) => r.action !== "FailJob") : at === -1);
  };
  ignoredExit("shard", "4", "a superseded shard");
  ignoredExit("worker", "143", "a worker stopped mid-job (a scale-down)");
  const failJob = rules.filter((r) => r.action === "FailJob" && r.onExitCodes);
  check(`${job.metadata.name}: a disruption is ignored first, then exit codes ${failJobCodes} of its own container fail the Job`,
    first.action === "Ignore" &&
      JSON.stringify(first.onPodConditions) === JSON.stringify([{ type: "DisruptionTarget", status: "True" }]) &&
      failJob.length === 1 && failJob[0].onExitCodes.containerName === component(job) &&
      failJob[0].onExitCodes.operator === "In" && failJob[0].onExitCodes.values.join(",") === failJobCodes,
    JSON.stringify(failJob.map((r) => r.onExitCodes)));
}

// Node loss: every pod tolerates a NotReady or unreachable node for nodeLoss.tolerationSeconds,
// then is replaced (absent with "none": the cluster's default).
for (const job of jobs) {
  const tolerations = job.spec.template.spec.tolerations || [];
  for (const key of ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"]) {
    const named = tolerations.filter((t) => t.key === key);
    const ok = nodeLoss === "none" ? named.length === 0
      : named.length === 1 && named[0].effect === "NoExecute" && named[0].operator === "Exists" &&
        String(named[0].tolerationSeconds) === nodeLoss;
    check(`${job.metadata.name}: ${key} tolerated ${nodeLoss === "none" ? "as the cluster decides" : `for ${nodeLoss} s`}`,
      ok, JSON.stringify(named));
  }
}

// Priority classes, per component (absent where not given).
for (const job of jobs) {
  const want = priorities[component(job)];
  const got = job.spec.template.spec.priorityClassName;
  check(`${job.metadata.name}: priorityClassName ${want || "(none)"}`, got === want, `is ${got}`);
}

// Topology spread: a constraint whose selector misses its own pods spreads nothing.
for (const job of jobs) {
  const template = job.spec.template;
  for (const c of template.spec.topologySpreadConstraints || []) {
    const labels = template.metadata.labels || {};
    const ok = Object.entries((c.labelSelector || {}).matchLabels || {}).every(([k, v]) => labels[k] === v);
    check(`${job.metadata.name}: spread over ${c.topologyKey} selects its own pods`,
      ok && c.labelSelector !== undefined);
  }
}

console.log(failures === 0 ? "scheduling_check: all passed" : `scheduling_check: ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
