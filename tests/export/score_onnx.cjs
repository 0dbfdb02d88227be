// Scores an ONNX graph with onnxruntime-node (CPU), for tests/python/test_export.py:
//   NODE_PATH=<onnx_tools.sh's dir>/node_modules node score_onnx.cjs MODEL.onnx INPUTS.json OUT.json
// INPUTS.json: {"<input>": {"dims": [...], "file": "<raw little-endian float32>"}, ...} (files,
// not JSON numbers: JSON has no NaN, and a missing numeric is NaN). OUT.json gets, per output,
// {"dims": [...], "file": ...} with the values written beside it the same way.
"use strict";
const fs = require("fs");
const path = require("path");
const ort = require("onnxruntime-node");

async function main() {
  const [model, inputsPath, outPath] = process.argv.slice(2);
  if (!outPath) throw new Error("usage: score_onnx.cjs MODEL.onnx INPUTS.json OUT.json");
  const spec = JSON.parse(fs.readFileSync(inputsPath, "utf8"));
  const feeds = {};
  for (const [name, input] of Object.entries(spec)) {
    const bytes = fs.readFileSync(input.file);
    const data = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
    feeds[name] = new ort.Tensor("float32", Float32Array.from(data), input.dims);
  }
  const session = await ort.InferenceSession.create(model);
  const results = await session.run(feeds);
  const out = {};
  for (const [name, tensor] of Object.entries(results)) {
    const file = path.join(path.dirname(outPath), `${name}.f32`);
    fs.writeFileSync(file, Buffer.from(new Float32Array(tensor.data).buffer));
    out[name] = { dims: tensor.dims, file };
  }
  fs.writeFileSync(outPath, JSON.stringify(out));
}

main().catch((error) => {
  console.error(`score_onnx: ${error.message}`);
  process.exit(1);
});
