/**
 * llama.cpp's built-in chat renderers (llama_chat_apply_template): recognised from a
 * template's text, not a Jinja engine.
 */

import { LlamaRefError } from "./errors.ts";
import { cString, type LlamaSymbols } from "./library.ts";
import { address, withPinned } from "./batch.ts";

export interface ChatMessage {
  role: string;
  content: string;
}

/** The prompt `template` makes of `messages`, retried with the size llama.cpp asks for;
 * `log` says why llama.cpp refused one. */
export function applyChatTemplate(
  sym: LlamaSymbols,
  template: string,
  messages: readonly ChatMessage[],
  addAssistant: boolean,
  log: () => string,
): string {
  const strings = messages.flatMap((m) => [cString(m.role), cString(m.content)]);
  const chat = new BigUint64Array(new ArrayBuffer(strings.length * 8));
  strings.forEach((s, i) => (chat[i] = address(s)));
  let capacity = 2 * strings.reduce((a, s) => a + s.length, 0) + 1024;
  for (;;) {
    const out = new Uint8Array(capacity);
    const n = withPinned(
      [chat, ...strings],
      () =>
        sym.llama_chat_apply_template(
          cString(template),
          chat,
          BigInt(messages.length),
          addAssistant,
          out,
          capacity,
        ),
    );
    if (n < 0) {
      throw new LlamaRefError(
        "llama_ref_unsupported",
        `llama_chat_apply_template does not know this template: ${log()}`,
      );
    }
    if (n <= capacity) return new TextDecoder().decode(out.subarray(0, n));
    capacity = n;
  }
}
