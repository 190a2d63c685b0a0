// onnxruntime runs xgrad's ONNX files (onnx_export_test.sh): each model, one session, over
// every batch of its cases, the logits compared with xgrad's (export_probe logits).
//   usage: node onnx_check.cjs NPM_DIR MANIFEST_JSON
// MANIFEST_JSON: [{"name", "model": FILE.onnx, "cases": [{"tokens": FILE.json ([[ids...],
// ...]), "logits": FILE.bin (xgrad's, float32 [B, T, vocab], little-endian)}]}].
// The bound: |onnxruntime - xgrad| <= 1e-5 * max(1, max |logit|) over each model's cases,
// the 1e-5 taken relative to the largest logit (both sides round in float32, in
// different orders and with different exp, tanh and erf; see docs/export.md).
// Prints each model's worst difference; exits 1 when one is past the bound.
"use strict";
const fs = require("fs");
const path = require("path");

const [npmDir, manifestPath] = process.argv.slice(2);
if (!manifestPath) {
  console.error("usage: node onnx_check.cjs NPM_DIR MANIFEST_JSON");
  process.exit(2);
}
const ort = require(path.join(npmDir, "node_modules", "onnxruntime-node"));
const kRelative = 1e-5;

function xgradLogits(file) {
  const bytes = fs.readFileSync(file);
  return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
}

async function checkModel(entry) {
  // One thread: the machine is shared, and the numbers do not depend on it.
  const session = await ort.InferenceSession.create(entry.model, { intraOpNumThreads: 1, interOpNumThreads: 1 });
  let worst = 0, largest = 0;
  const shapes = [];
  for (const c of entry.cases) {
    const tokens = JSON.parse(fs.readFileSync(c.tokens, "utf8"));
    const batch = tokens.length, length = tokens[0].length;
    const ids = BigInt64Array.from(tokens.flat().map(BigInt));
    const { logits } = await session.run({ input_ids: new ort.Tensor("int64", ids, [batch, length]) });
    const expected = xgradLogits(c.logits);
    const vocab = expected.length / (batch * length);
    if (logits.dims.join() !== [batch, length, vocab].join())
      throw new Error(`${entry.name}: logits are [${logits.dims}], xgrad's [${batch}, ${length}, ${vocab}]`);
    for (let i = 0; i < expected.length; ++i) {
      worst = Math.max(worst, Math.abs(logits.data[i] - expected[i]));
      largest = Math.max(largest, Math.abs(expected[i]));
    }
    if (!(worst >= 0)) throw new Error(`${entry.name}: NaN in the logits`);
    shapes.push(`${batch}x${length}`);
  }
  const bound = kRelative * Math.max(1, largest);
  const ok = worst <= bound;
  console.log(`${ok ? "ok" : "FAILED"} ${entry.name} (${shapes.join(", ")}): worst |diff| ${worst.toExponential(2)}, ` +
    `max |logit| ${largest.toFixed(2)}, relative ${(worst / Math.max(1, largest)).toExponential(2)}, ` +
    `bound ${bound.toExponential(2)}`);
  return ok;
}

(async () => {
  const manifest = JSON.parse(fs.readFileSync(manifestPath, "utf8"));
  let failed = 0;
  for (const entry of manifest) {
    try {
      if (!(await checkModel(entry))) ++failed;
    } catch (e) {
      console.log(`FAILED ${entry.name}: ${e.message}`);
      ++failed;
    }
  }
  process.exit(failed ? 1 : 0);
})();
