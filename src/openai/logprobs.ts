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
  token_logprobs: number[];
  top_logprobs: Record<string, number>[] | null;
  text_offset: number[];
}

/** Legacy completions log-probs; `offset` is the text length before these tokens. */
export function completionLogprobs(
  tokens: GeneratedToken[],
  withTop: boolean,
  asIds: boolean,
  offset: number,
): CompletionLogprobs {
  const out: CompletionLogprobs = {
    tokens: [],
    token_logprobs: [],
    top_logprobs: withTop ? [] : null,
    text_offset: [],
  };
  let at = offset;
  for (const t of tokens) {
    const name = tokenName(t.id, t.bytes, asIds);
    out.tokens.push(name);
    out.token_logprobs.push(t.logprob ?? 0);
    out.text_offset.push(at);
    at += decoder.decode(t.bytes).length;
    if (out.top_logprobs) {
      const top: Record<string, number> = {};
      for (const a of t.top ?? []) top[tokenName(a.id, a.bytes, asIds)] = a.logprob;
      out.top_logprobs.push(top);
    }
  }
  return out;
}
