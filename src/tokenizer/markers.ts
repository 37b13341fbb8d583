/**
 * The fixes llama.cpp applies to a vocabulary on top of what the file says
 * (llama_vocab::impl::load): tokens that look like end-of-turn, FIM or end-of-generation
 * markers become CONTROL, control tokens named "unused" become UNUSED, gpt-oss markers are
 * always rendered, and the end-of-generation set is derived from all of it.
 */

import { ATTR_CONTROL, ATTR_NORMAL, ATTR_UNUSED, ATTR_USER_DEFINED } from "./attrs.ts";

// Texts llama.cpp recognises as end-of-turn, FIM and end-of-generation markers.
const EOT_TEXTS = [
  "<|eot_id|>",
  "<|im_end|>",
  "<|end|>",
  "<end_of_turn>",
  "<|endoftext|>",
  "<|end_of_text|>",
  "<EOT>",
  "_<EOT>",
  "[EOT]",
  "<｜end▁of▁sentence｜>",
  "<end_of_utterance>",
];
const EOM_TEXTS = ["<|eom_id|>"];
const FIM_PRE_TEXTS = [
  "<|fim_prefix|>",
  "<fim-prefix>",
  "<fim_prefix>",
  "<｜fim▁begin｜>",
  "<PRE>",
  "▁<PRE>",
  "<|code_prefix|>",
  "<|prefix|>",
];
const FIM_SUF_TEXTS = [
  "<|fim_suffix|>",
  "<fim-suffix>",
  "<fim_suffix>",
  "<｜fim▁hole｜>",
  "<SUF>",
  "▁<SUF>",
  "<|code_suffix|>",
  "<|suffix|>",
];
const FIM_MID_TEXTS = [
  "<|fim_middle|>",
  "<fim-middle>",
  "<fim_middle>",
  "<｜fim▁end｜>",
  "<MID>",
  "▁<MID>",
  "<|code_middle|>",
  "<|middle|>",
];
const FIM_PAD_TEXTS = ["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_TEXTS = ["<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"];
const FIM_SEP_TEXTS = ["<|file_sep|>"];
const EOG_TEXTS = [
  "<|eot_id|>",
  "<|im_end|>",
  "<|end|>",
  "<|return|>",
  "<|call|>",
  "<|flush|>",
  "<|calls|>",
  "<end_of_turn>",
  "<|endoftext|>",
  "</s>",
  "<|eom_id|>",
  "<EOT>",
  "_<EOT>",
  "[EOT]",
  "[EOS]",
  "<|end_of_text|>",
  "<end_of_utterance>",
  "<eos>",
  "<turn|>",
  "<|tool_response>",
  "<｜end▁of▁sentence｜>",
  "[e~[",
];
// gpt-oss markers llama.cpp always renders as text.
const ALWAYS_RENDERED = ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"];

/**
 * Applies llama.cpp's text-based fixes to `attrs` and returns the end-of-generation set.
 * `given` is the id the file names for a `tokenizer.ggml.<key>` (null when none or out of
 * range); markers the file does not name are recognised by their text.
 */
export function markSpecialTokens(
  texts: readonly string[],
  attrs: Uint8Array,
  idOf: ReadonlyMap<string, number>,
  given: (key: string) => number | null,
  eosId: number | null,
): Set<number> {
  const detect = (key: string, candidates: readonly string[]): number | null => {
    const id = given(key);
    if (id !== null) return id;
    for (const t of candidates) {
      const found = idOf.get(t);
      if (found === undefined) continue;
      attrs[found] |= ATTR_CONTROL;
      return found;
    }
    return null;
  };
  const eotId = detect("eot_token_id", EOT_TEXTS);
  const eomId = detect("eom_token_id", EOM_TEXTS);
  detect("fim_pre_token_id", FIM_PRE_TEXTS);
  detect("fim_suf_token_id", FIM_SUF_TEXTS);
  detect("fim_mid_token_id", FIM_MID_TEXTS);
  const fimPad = detect("fim_pad_token_id", FIM_PAD_TEXTS);
  const fimRep = detect("fim_rep_token_id", FIM_REP_TEXTS);
  const fimSep = detect("fim_sep_token_id", FIM_SEP_TEXTS);

  for (let id = 0; id < texts.length; id++) {
    if ((attrs[id] & ATTR_CONTROL) !== 0 && texts[id].includes("unused")) attrs[id] |= ATTR_UNUSED;
  }

  const eog = new Set<number>();
  for (const id of [fimPad, fimRep, fimSep]) if (id !== null) eog.add(id);
  for (const t of EOG_TEXTS) {
    const id = idOf.get(t);
    if (id === undefined) continue;
    eog.add(id);
    attrs[id] |= ATTR_CONTROL;
  }
  for (const t of ALWAYS_RENDERED) {
    const id = idOf.get(t);
    if (id !== undefined) attrs[id] = ATTR_USER_DEFINED;
  }
  for (const id of [eosId, eotId, eomId]) if (id !== null) eog.add(id);
  applyEogWorkarounds(texts, attrs, eog);
  return eog;
}

/**
 * llama.cpp's two vocabulary-specific exceptions: harmony-style vocabularies (with
 * `<|return|>`+`<|call|>` or `<|calls|>`+`<|flush|>`) do not end on `<|end|>`, and
 * vocabularies with `<|tool_response>` do not end on `</s>`.
 */
function applyEogWorkarounds(texts: readonly string[], attrs: Uint8Array, eog: Set<number>): void {
  const find = (t: string): number | undefined => [...eog].find((id) => texts[id] === t);
  const end = find("<|end|>");
  const call = find("<|call|>") ?? find("<|calls|>");
  if (
    end !== undefined && call !== undefined &&
    (find("<|return|>") !== undefined || find("<|flush|>") !== undefined)
  ) {
    eog.delete(end);
    attrs[end] = ATTR_USER_DEFINED;
  }
  const s = find("</s>");
  if (s !== undefined && find("<|tool_response>") !== undefined) {
    eog.delete(s);
    attrs[s] = ATTR_NORMAL;
  }
}
