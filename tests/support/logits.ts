/** Small measures of a logit vector that the reference tests compare by. */

/** The best id, and how far it leads the second best. */
export function argmaxMargin(logits: Float32Array): { id: number; margin: number } {
  let best = 0;
  let second = -Infinity;
  for (let i = 1; i < logits.length; i++) {
    const v = logits[i];
    if (v > logits[best]) {
      second = logits[best];
      best = i;
    } else if (v > second) {
      second = v;
    }
  }
  return { id: best, margin: logits[best] - second };
}

/** The `k` highest `[id, logit]` pairs, highest first (ties: lower id first). */
export function topLogits(logits: Float32Array, k: number): Array<[number, number]> {
  const top: Array<[number, number]> = [];
  for (let i = 0; i < logits.length; i++) {
    const v = logits[i];
    if (top.length === k && v <= top[k - 1][1]) continue;
    let at = top.length;
    while (at > 0 && top[at - 1][1] < v) at--;
    top.splice(at, 0, [i, v]);
    if (top.length > k) top.pop();
  }
  return top;
}
