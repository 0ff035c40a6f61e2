// Validates an AsyncAPI document with the AsyncAPI initiative's own parser (the one its CLI and Studio use).
// Usage: node scripts/validate-asyncapi.mjs [path]   (default: ../../contract/asyncapi.yaml)
// Prints every diagnostic; exits 1 when the parser reports an error or gives no document.
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { resolve, dirname } from "node:path";
import parserPackage from "@asyncapi/parser";

const { Parser, DiagnosticSeverity } = parserPackage;
const here = dirname(fileURLToPath(import.meta.url));
const path = resolve(process.argv[2] ?? resolve(here, "../../../contract/asyncapi.yaml"));
const parser = new Parser();
const { document, diagnostics } = await parser.parse(await readFile(path, "utf8"), { source: path });
const names = Object.fromEntries(Object.entries(DiagnosticSeverity).map(([k, v]) => [v, k]));
for (const d of diagnostics) {
  console.log(`${names[d.severity] ?? d.severity} ${d.code}: ${d.message} at ${d.path.join(".")}`);
}
const errors = diagnostics.filter((d) => d.severity === DiagnosticSeverity.Error);
if (!document || errors.length > 0) {
  console.log(`INVALID: ${errors.length} error(s) in ${path}`);
  process.exit(1);
}
const ops = document.operations().all().map((op) => op.id());
console.log(`VALID: ${path}: AsyncAPI ${document.version()}, ${document.channels().length} channels, ` +
  `${ops.length} operations (${ops.join(", ")}), ${document.messages().length} messages`);
