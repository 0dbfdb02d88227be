// Validates every object of multi-document Kubernetes YAML files against the Kubernetes 1.27 schemas
// (npm kubernetes-models; ServiceMonitor from @kubernetes-models/prometheus-operator). Catches wrong
// types and missing required fields, not misspelled extra fields (../shared/TOOLING.md).
// The gang schedulers' PodGroups have no model package: a hand-written check of their shape
// (podGroupShapes below) stands in, and says so in its output line.
//   node validate_k8s.cjs TOOLS_DIR FILE...    exit 0 iff every object of every file is valid
"use strict";
const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

const [toolsDir, ...files] = process.argv.slice(2);
if (!toolsDir || files.length === 0) {
  console.error("usage: node validate_k8s.cjs TOOLS_DIR FILE...");
  process.exit(2);
}
const toolsRequire = createRequire(path.join(path.resolve(toolsDir), "package.json"));
const YAML = toolsRequire("yaml");

// apiVersion "apps/v1" kind "Deployment" -> kubernetes-models/apps/v1/Deployment; CRDs by group.
function modelClass(apiVersion, kind) {
  const crdPackages = { "monitoring.coreos.com": "@kubernetes-models/prometheus-operator" };
  const group = apiVersion.includes("/") ? apiVersion.split("/")[0] : "";
  const pkg = crdPackages[group] || "kubernetes-models";
  const module = toolsRequire(`${pkg}/${apiVersion}/${kind}`);
  return module[kind] || module.default;
}

// PodGroup CRDs without a model package: the spec fields of each CRD's openAPIV3Schema
// (volcano-sh/volcano config/crd/volcano/bases/scheduling.volcano.sh_podgroups.yaml,
// kubernetes-sigs/scheduler-plugins manifests/coscheduling/crd.yaml), and minMember, the one field
// the chart must get right, a positive integer (int32).
const podGroupShapes = {
  "scheduling.volcano.sh/v1beta1": ["minMember", "minResources", "minTaskMember", "networkTopology",
                                    "priorityClassName", "queue", "preemptable"],
  "scheduling.x-k8s.io/v1alpha1": ["minMember", "minResources", "scheduleTimeoutSeconds"],
};
function validatePodGroup(obj) {
  const fields = podGroupShapes[obj.apiVersion];
  if (!obj.metadata || typeof obj.metadata.name !== "string" || obj.metadata.name === "") {
    throw new Error("metadata.name is required");
  }
  const spec = obj.spec || {};
  const unknown = Object.keys(spec).filter((k) => !fields.includes(k));
  if (unknown.length > 0) throw new Error(`unknown spec fields: ${unknown.join(", ")}`);
  if (!Number.isInteger(spec.minMember) || spec.minMember < 1 || spec.minMember > 2147483647) {
    throw new Error(`spec.minMember must be a positive int32, is ${JSON.stringify(spec.minMember)}`);
  }
}

let objects = 0;
let failures = 0;
for (const file of files) {
  const docs = YAML.parseAllDocuments(fs.readFileSync(file, "utf8"));
  for (const doc of docs) {
    if (doc.errors.length > 0) {
      console.error(`${file}: YAML error: ${doc.errors[0].message}`);
      failures++;
      continue;
    }
    const obj = doc.toJS();
    if (obj === null || obj === undefined) continue;  // empty document
    const name = `${file}: ${obj.kind}/${obj.metadata && obj.metadata.name}`;
    objects++;
    try {
      if (obj.kind === "PodGroup" && obj.apiVersion in podGroupShapes) {
        validatePodGroup(obj);
        console.log(`ok      ${name} (${obj.apiVersion}; hand-written shape check, no CRD schema)`);
        continue;
      }
      const Model = modelClass(obj.apiVersion, obj.kind);
      new Model(obj).validate();
      console.log(`ok      ${name} (${obj.apiVersion})`);
    } catch (error) {
      failures++;
      const detail = error.code === "MODULE_NOT_FOUND" ? `no schema for ${obj.apiVersion} ${obj.kind}`
                                                       : error.message;
      console.error(`INVALID ${name}: ${detail}`);
    }
  }
}
console.log(`${objects} objects, ${failures} invalid`);
if (objects === 0) {
  console.error("no objects found");
  process.exit(1);
}
process.exit(failures === 0 ? 0 : 1);
