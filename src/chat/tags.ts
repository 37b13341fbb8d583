/** Helpers for finding tags in streamed text that may end in the middle of a tag. */

/** Length of the longest suffix of `text` that is a proper prefix of `tag` (0 if none). */
export function partialTagLength(text: string, tag: string): number {
  for (let k = Math.min(tag.length - 1, text.length); k > 0; k--) {
    if (text.endsWith(tag.slice(0, k))) return k;
  }
  return 0;
}

/** Index just past the last non-whitespace character of `text` (0 if all whitespace). */
export function endOfText(text: string): number {
  return text.trimEnd().length;
}

/** One piece of parsed model output. */
export type TextEvent = { kind: "reasoning" | "content"; text: string };

/** Appends a text event, merging it into the previous one if that has the same kind. */
export function pushText<E extends { kind: string }>(
  events: (E | TextEvent)[],
  kind: TextEvent["kind"],
  text: string,
): void {
  if (text === "") return;
  const last = events[events.length - 1];
  if (last !== undefined && last.kind === kind) (last as TextEvent).text += text;
  else events.push({ kind, text });
}
