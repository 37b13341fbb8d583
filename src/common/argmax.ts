/** Index of the largest value (the lowest index among ties; NaN never wins over a number). */
export function argmax(x: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}

/**
 * The index of the largest value among those `bits` allows (bit i of word i >>> 5: index
 * i), the lowest among ties; NaN never wins. With no number allowed: the first allowed
 * index, else 0.
 */
export function maskedArgmax(x: ArrayLike<number>, bits: Uint32Array): number {
  let best = -1;
  let first = -1;
  for (let w = 0; w < bits.length; w++) {
    for (let word = bits[w]; word !== 0; word &= word - 1) {
      const i = (w << 5) | (31 - Math.clz32(word & -word));
      if (i >= x.length) break;
      if (first < 0) first = i;
      if (!Number.isNaN(x[i]) && (best < 0 || x[i] > x[best])) best = i;
    }
  }
  return best >= 0 ? best : Math.max(first, 0);
}
