// Validates every object of multi-document Kubernetes YAML files against the Kubernetes 1.27 schemas
// (npm kubernetes-models; ServiceMonitor from @kubernetes-models/prometheus-operator). Catches wrong
// types and missing required fields, not misspelled extra fields (../shared/TOOLING.md).
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
