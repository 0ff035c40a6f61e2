// Validates AsyncAPI documents with the AsyncAPI initiative's own parser (the one its CLI and Studio use).
// Usage: node scripts/validate-asyncapi.mjs [path ...]   (default: ../../contract/asyncapi.yaml)
// Prints every diagnostic and one VALID or INVALID line per document; exits 1 when any document has an error.
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { resolve, dirname } from "node:path";
import parserPackage from "@asyncapi/parser";

const { Parser, DiagnosticSeverity } = parserPackage;
const here = dirname(fileURLToPath(import.meta.url));
const paths = process.argv.length > 2 ? process.argv.slice(2) : [resolve(here, "../../../contract/asyncapi.yaml")];
const names = Object.fromEntries(Object.entries(DiagnosticSeverity).map(([k, v]) => [v, k]));
const parser = new Parser();
let failed = false;
for (const given of paths) {
  const path = resolve(given);
  const { document, diagnostics } = await parser.parse(await readFile(path, "utf8"), { source: path });
  for (const d of diagnostics) {
    console.log(`${names[d.severity] ?? d.severity} ${d.code}: ${d.message} at ${d.path.join(".")}`);
  }
  const errors = diagnostics.filter((d) => d.severity === DiagnosticSeverity.Error);
  if (!document || errors.length > 0) {
    console.log(`INVALID: ${path}: ${errors.length} error(s)`);
    failed = true;
    continue;
  }
  const ops = document.operations().all().map((op) => op.id());
  console.log(`VALID: ${path}: AsyncAPI ${document.version()}, ${document.channels().length} channels, ` +
    `${ops.length} operations (${ops.join(", ")}), ${document.messages().length} messages`);
}
process.exit(failed ? 1 : 0);
