/**
 * The chat templates the other families' model repos publish, as test data (README.md says
 * where each comes from), with the BOS/EOS texts and add-BOS flag of their GGUF vocabularies.
 */

export interface RealTemplate {
  source: string;
  bosToken: string;
  eosToken: string;
  /** The vocabulary adds BOS itself (`tokenizer.ggml.add_bos_token`). */
  addBos: boolean;
}

const FILES = {
  "llama3.1": ["llama-3.1-8b-instruct.jinja", "<|begin_of_text|>", "<|eot_id|>", true],
  "mistral-v0.3": ["mistral-7b-instruct-v0.3.jinja", "<s>", "</s>", true],
  "qwen2.5": ["qwen2.5-7b-instruct.jinja", "<|endoftext|>", "<|im_end|>", false],
  "gemma3": ["gemma-3-it.jinja", "<bos>", "<eos>", true],
} as const;

export type Family = keyof typeof FILES;

export const FAMILIES: readonly Family[] = Object.keys(FILES) as Family[];

/** A family's template with its special tokens. */
export function realTemplateOf(family: Family): RealTemplate {
  const [file, bosToken, eosToken, addBos] = FILES[family];
  const source = Deno.readTextFileSync(new URL(file, import.meta.url));
  return { source, bosToken, eosToken, addBos };
}

/** A family's template source. */
export function realTemplate(family: Family): string {
  return realTemplateOf(family).source;
}
