// Train a step model (helpers.portable) with onnxruntime-web, the runtime a browser runs.
//
//   node train_step.mjs STEP.onnx JOB.json OUT.json
//
// JOB.json: {"inputs": {"X": TENSOR, "label": TENSOR, ...}, "batches": [[row, ...], ...],
//            "state": {"name": TENSOR, ...}, "first_step": 1}
// TENSOR: {"dtype": "float32" | "int64", "shape": [...], "data": [...]} (data flat, row-major).
// Each batch is the rows of one step, in order; the state starts at JOB.state and the step
// count at first_step. OUT.json receives {"losses": [...], "state": {"name": TENSOR, ...},
// "version": "<onnxruntime-web version>"}.
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import * as ort from "onnxruntime-web";

const [stepPath, jobPath, outPath] = process.argv.slice(2);
if (!outPath) {
  console.error("usage: node train_step.mjs STEP.onnx JOB.json OUT.json");
  process.exit(2);
}
const job = JSON.parse(readFileSync(jobPath, "utf8"));
ort.env.wasm.numThreads = 1;
ort.env.logLevel = "error";
const session = await ort.InferenceSession.create(readFileSync(stepPath), { logSeverityLevel: 3 });

const arrays = { float32: Float32Array, int64: BigInt64Array };
function toTensor({ dtype, shape, data }) {
  const values = dtype === "int64" ? data.map((v) => BigInt(v)) : data;
  return new ort.Tensor(dtype, arrays[dtype].from(values), shape);
}
function fromTensor(tensor) {
  const data = Array.from(tensor.data, (v) => (typeof v === "bigint" ? Number(v) : v));
  return { dtype: tensor.type, shape: tensor.dims, data };
}
function rows(tensor, indices) {
  const width = tensor.shape.slice(1).reduce((a, b) => a * b, 1);
  const data = indices.flatMap((i) => tensor.data.slice(i * width, (i + 1) * width));
  return toTensor({ dtype: tensor.dtype, shape: [indices.length, ...tensor.shape.slice(1)], data });
}

let state = Object.fromEntries(Object.entries(job.state).map(([k, t]) => [k, toTensor(t)]));
const losses = [];
let step = BigInt(job.first_step ?? 1);
for (const batch of job.batches) {
  const feeds = { ...state, step: new ort.Tensor("int64", BigInt64Array.from([step]), []) };
  for (const [name, tensor] of Object.entries(job.inputs)) feeds[name] = rows(tensor, batch);
  const out = await session.run(feeds);
  losses.push(out.loss.data[0]);
  state = Object.fromEntries(Object.keys(state).map((k) => [k, out[`${k}.next`]]));
  step += 1n;
}
const result = { losses, state: Object.fromEntries(Object.entries(state).map(([k, t]) => [k, fromTensor(t)])), version: ort.env.versions.web };
writeFileSync(`${outPath}.tmp`, JSON.stringify(result));
renameSync(`${outPath}.tmp`, outPath);
