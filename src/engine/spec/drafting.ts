/**
 * The drafts of one engine step: for each decoding sequence that speculates, as many
 * tokens as the batch leaves room for (draftShare), as it may still produce, as fit before
 * the context's end and as its policy allows now, from prompt lookup or from the draft
 * model (all its sequences in one batch per draft step), cut at a constraint's first
 * refused token.
 */

import type { Sequence } from "../sequence.ts";
import type { DraftModel } from "./draft_model.ts";
import { draftShare } from "./speculation.ts";

export function planDrafts(
  running: readonly Sequence[],
  contextLength: number,
  drafter: DraftModel | null,
): void {
  const decoding = running.filter((s) => !s.prefilling && !s.finished);
  const share = draftShare(decoding.length);
  for (const seq of running) seq.draft = [];
  const wants = new Map<Sequence, number>();
  for (const seq of decoding) {
    const spec = seq.speculation;
    if (spec === null) continue;
    const k = spec.length(
      Math.max(0, Math.min(share, seq.remaining - 1, contextLength - seq.tokens.length)),
    );
    if (spec.source === "ngram") seq.draft = spec.cut(spec.lookup(seq.tokens, k), seq.filter);
    else if (k > 0) wants.set(seq, k);
  }
  if (drafter === null) return;
  drafter.keep(new Set(running));
  for (const [seq, draft] of drafter.draft(wants)) {
    seq.draft = seq.speculation!.cut(draft, seq.filter);
  }
}
