/** Log-prob shapes: chat's `logprobs.content[]` and the legacy completions arrays. */

import type { GeneratedToken } from "./generation.ts";

const decoder = new TextDecoder("utf-8", { ignoreBOM: true });

/** How a token is named in log-probs: its text, or `token_id:<id>` when asked. */
export function tokenName(id: number, bytes: Uint8Array, asIds: boolean): string {
  return asIds ? `token_id:${id}` : decoder.decode(bytes);
}

export interface ChatLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

export function chatLogprobs(tokens: GeneratedToken[], asIds: boolean): ChatLogprob[] {
  return tokens.map((t) => ({
    token: tokenName(t.id, t.bytes, asIds),
    logprob: t.logprob ?? 0,
    bytes: Array.from(t.bytes),
    top_logprobs: (t.top ?? []).map((a) => ({
      token: tokenName(a.id, a.bytes, asIds),
      logprob: a.logprob,
      bytes: Array.from(a.bytes),
    })),
  }));
}

export interface CompletionLogprobs {
  tokens: string[];
  /** Null for an echoed prompt's first token, which nothing predicts. */
  token_logprobs: Array<number | null>;
  top_logprobs: Array<Record<string, number> | null> | null;
  text_offset: number[];
}

/**
 * Legacy completions log-probs; `offset` is the text length before these tokens, and the
 * first `prompt` of them are an echoed prompt's (its first token has none).
 */
export function completionLogprobs(
  tokens: GeneratedToken[],
  withTop: boolean,
  asIds: boolean,
  offset: number,
  prompt = 0,
): CompletionLogprobs {
  const out: CompletionLogprobs = {
    tokens: [],
    token_logprobs: [],
    top_logprobs: withTop ? [] : null,
    text_offset: [],
  };
  let at = offset;
  tokens.forEach((t, i) => {
    const unpredicted = i === 0 && prompt > 0;
    const name = tokenName(t.id, t.bytes, asIds);
    out.tokens.push(name);
    out.token_logprobs.push(unpredicted ? null : t.logprob ?? 0);
    out.text_offset.push(at);
    at += decoder.decode(t.bytes).length;
    if (out.top_logprobs) {
      const top: Record<string, number> = {};
      for (const a of t.top ?? []) top[tokenName(a.id, a.bytes, asIds)] = a.logprob;
      out.top_logprobs.push(unpredicted ? null : top);
    }
  });
  return out;
}
