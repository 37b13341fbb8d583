/**
 * Where the shared fixtures live: `$NEURON_FIXTURES`, else `../shared/fixtures` beside
 * the checkout, else `shared/fixtures` inside it (as on GPU hosts, where the checkout
 * travels alone). A missing fixture directory fails the tests that need it, loudly.
 */

const ROOT = new URL("../", import.meta.url);

function exists(path: string): boolean {
  try {
    return Deno.statSync(path).isDirectory;
  } catch {
    return false;
  }
}

function resolveFixtures(): string {
  const fromEnv = Deno.env.get("NEURON_FIXTURES");
  if (fromEnv) return fromEnv;
  const candidates = [
    new URL("../shared/fixtures", ROOT).pathname,
    new URL("shared/fixtures", ROOT).pathname,
  ];
  return candidates.find(exists) ?? candidates[0];
}

/** Absolute path of the fixture directory. */
export const FIXTURES: string = resolveFixtures();

/** Absolute path of a file in the fixture directory. */
export function fixture(name: string): string {
  const path = `${FIXTURES}/${name}`;
  try {
    Deno.statSync(path);
  } catch {
    throw new Error(`fixture ${name} not found in ${FIXTURES} (set NEURON_FIXTURES)`);
  }
  return path;
}

/** The model fixtures that have goldens, by base name. */
export const MODEL_FIXTURES = [
  "qwen3-tiny-f16",
  "qwen3-tiny-q8_0",
  "qwen3-tiny-q4_0",
  "qwen3-small-q4_k_m",
] as const;

export type ModelFixture = (typeof MODEL_FIXTURES)[number];

export interface GoldenStep {
  id: number;
  margin: number;
  logit: number;
  top5: Array<[number, number]>;
}

export interface GoldenPrompt {
  name: string;
  text?: string;
  messages?: Array<Record<string, unknown>>;
  tools?: Array<Record<string, unknown>>;
  chat_template_kwargs?: Record<string, unknown>;
  tokens: number[];
  last_topk: Array<[number, number]>;
  argmax_per_position: number[];
  margin_per_position: number[];
  argmax_logit_per_position: number[];
  greedy: GoldenStep[];
  greedy_text: string;
}

export interface ModelGolden {
  model_file: string;
  min_margin: { greedy: number; argmax_per_position: number };
  prompts: GoldenPrompt[];
}

/** The golden of a model fixture, parsed. */
export function modelGolden(model: ModelFixture): ModelGolden {
  return JSON.parse(Deno.readTextFileSync(fixture(`golden/${model}.json`)));
}

/** Max abs difference of top-20 logits allowed per fixture (fixtures/README.md). */
export const LOGIT_TOLERANCE: Record<ModelFixture, number> = {
  "qwen3-tiny-f16": 0.05,
  "qwen3-tiny-q8_0": 0.75,
  "qwen3-tiny-q4_0": 0.75,
  "qwen3-small-q4_k_m": 0.40,
};

/**
 * Tiny models of the Llama 3.1, Mistral, Qwen2.5 and Gemma 3 families with their real
 * vocabularies, made by code on first use and cached (`deno task fixtures` makes them all):
 * `await familyFixture("gemma3", "q8_0")` is the path of `gemma3-tiny-q8_0.gguf`.
 */
export {
  FAMILIES,
  type Family,
  familyFixture,
  familyFixtureDir,
  FIXTURE_QUANTS,
  type FixtureQuant,
} from "./fixtures/families/mod.ts";
