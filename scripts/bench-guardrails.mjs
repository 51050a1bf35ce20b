// `npm run bench -- --only guardrails` or `node scripts/bench-guardrails.mjs`: the time one prompt-rule check
// takes on this machine, for the worst cases the gateway accepts (docs/guardrails.md, "What a check costs").
// Transpiles src/guardrails/ (and what it imports) with TypeScript into a temporary folder and loads it: no build needed.
// Prints one row per case: the steps the check counted, its median and worst CPU time over the runs, and its verdict.
// Options: --runs N (default 15), --length N (the prompts' length; default the longest the gateway takes), --json (the rows as JSON).
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const root = path.resolve(import.meta.dirname, '..');
const ts = require('typescript');
const flag = (name) => {
  const at = process.argv.indexOf(`--${name}`);
  return at === -1 ? undefined : process.argv[at + 1];
};
const RUNS = Number(flag('runs') ?? 15);

/** Transpiles `entry` and every relative module it imports into `out`, keeping src/'s layout. */
function transpile(entry, out) {
  const seen = new Set();
  const visit = (file) => {
    if (seen.has(file)) return;
    seen.add(file);
    const source = fs.readFileSync(file, 'utf8');
    const { outputText } = ts.transpileModule(source, {
      compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
    });
    const target = path.join(out, path.relative(root, file)).replace(/\.ts$/, '.js');
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.writeFileSync(target, outputText);
    for (const [, spec] of source.matchAll(/from '(\.[^']+)'/g)) {
      const base = path.resolve(path.dirname(file), spec);
      if (fs.existsSync(`${base}.ts`)) visit(`${base}.ts`);
      else if (fs.existsSync(path.join(base, 'index.ts'))) visit(path.join(base, 'index.ts'));
    }
  };
  visit(entry);
  return path.join(out, path.relative(root, entry)).replace(/\.ts$/, '.js');
}

// Under node_modules/.cache so that the modules' own imports of packages resolve.
fs.mkdirSync(path.join(root, 'node_modules/.cache'), { recursive: true });
const out = fs.mkdtempSync(path.join(root, 'node_modules/.cache/bench-guardrails-'));
let rules;
try {
  rules = require(transpile(path.join(root, 'src/guardrails/prompt-rules.ts'), out));
} finally {
  process.on('exit', () => fs.rmSync(out, { recursive: true, force: true }));
}
const { CompiledPromptRules, PROMPT_RULE_LIMITS, validatePromptRules, mergePromptRules } = rules;

const MAX_PROMPT = Number(flag('length') ?? PROMPT_RULE_LIMITS.promptLength);

/** Patterns of about `states` states each, every one a different shape of repetition. */
function heavyPatterns(count, shape) {
  return Array.from({ length: count }, (_, i) => shape(i));
}

/** A set, validated as the admin API validates it (throws when the gateway would refuse it). */
function accepted(input) {
  const result = validatePromptRules(input);
  if (!result.ok) throw new Error(`refused: ${JSON.stringify(result.errors).slice(0, 300)}`);
  return result.rules;
}

const SETS = {
  // The report's set: 12 patterns, 1,600 states each (19,200 in all), bounded repetitions that keep many states alive.
  'report: 12 × [a-z]{0,99}x[a-z]{0,99}…': () =>
    accepted(heavyPatterns(12, (i) => ({ kind: 'blocked_pattern', pattern: `[a-z ]{0,99}${String.fromCharCode(0x61 + i)}q[a-z ]{0,99}z{0,90}!` }))),
  'dfa blow-up: 12 × (a|b)*a(a|b){k}': () => accepted(heavyPatterns(12, (i) => ({ kind: 'blocked_pattern', pattern: `[ab]*a[ab]{${60 + i}}!` }))),
  'classes: 12 × \\p{L}{0,99}\\s\\p{N}{0,99}…': () =>
    accepted(heavyPatterns(12, () => ({ kind: 'blocked_pattern', pattern: `\\p{L}{0,99}\\s\\p{N}{0,99}[^\\p{L}\\p{N}\\s]{0,90}!` }))),
  'words: 12 × 60-word alternations, \\b': () =>
    accepted(
      heavyPatterns(12, (i) => ({
        kind: 'blocked_pattern',
        pattern: `\\b(${Array.from({ length: 60 }, (_, j) => `a${String.fromCharCode(0x61 + i)}${j}b`).join('|')})\\b`,
      })),
    ),
  'terms: 1,000 terms of 200 characters': () =>
    accepted(Array.from({ length: 1000 }, (_, i) => ({ kind: 'blocked_term', term: `${'ab '.repeat(70).slice(0, 190)}${i}`.padEnd(200, 'q') }))),
  'terms: 1,000 Cyrillic terms': () => accepted(Array.from({ length: 1000 }, (_, i) => ({ kind: 'blocked_term', term: `сука ${i} тварь` }))),
  'allow-list: 100 patterns': () => accepted([{ kind: 'allow_list', patterns: Array.from({ length: 100 }, (_, i) => `[a-z ]{0,30}s${i}ubject[a-z ,]{0,60}`) }]),
};
const PROMPTS = {
  'a b a b… (ASCII)': () => 'ab '.repeat(MAX_PROMPT).slice(0, MAX_PROMPT),
  'random a/b': () => Array.from({ length: MAX_PROMPT }, (_, i) => (((i * 2654435761) >>> 7) % 2 ? 'a' : 'b')).join(''),
  'words and digits': () => 'the quick brown fox 123 jumps over '.repeat(MAX_PROMPT).slice(0, MAX_PROMPT),
  'CJK, all different': () => Array.from({ length: MAX_PROMPT }, (_, i) => String.fromCodePoint(0x4e00 + (i % 20000))).join(''),
  'U+FDFA (folds to 18 characters)': () => '\ufdfa'.repeat(MAX_PROMPT),
};

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

const rows = [];
for (const [setName, makeSet] of Object.entries(SETS)) {
  const set = makeSet();
  // A key's set adds to its project's: the largest set a check sees is two accepted sets merged.
  const merged = mergePromptRules(
    set,
    set.map((rule) => ({ ...rule, id: `${rule.id}_k` })),
  );
  for (const [promptName, makePrompt] of Object.entries(PROMPTS)) {
    const prompt = makePrompt();
    const times = [];
    let steps = 0;
    let verdict;
    // A new compiled set each run: the cold case (nothing cached), the one that costs most.
    for (let run = 0; run < RUNS; run += 1) {
      const compiled = new CompiledPromptRules(merged);
      const meter = { steps: 0 };
      // CPU time, not wall time: on a shared machine a check waits for a core without working.
      const started = process.cpuUsage();
      verdict = compiled.check(prompt, meter);
      const used = process.cpuUsage(started);
      times.push((used.user + used.system) / 1e3);
      steps = meter.steps;
    }
    rows.push({
      set: setName,
      prompt: promptName,
      steps,
      median_ms: Number(median(times).toFixed(2)),
      max_ms: Number(Math.max(...times).toFixed(2)),
      verdict: verdict.allowed ? 'allowed' : `${verdict.kind}`,
    });
  }
}
if (process.argv.includes('--json')) console.log(JSON.stringify(rows));
else {
  console.log(`prompt rules: one check, cold, ${RUNS} runs, prompts of ${MAX_PROMPT} characters, budget ${PROMPT_RULE_LIMITS.checkSteps} steps`);
  console.table(rows);
}
