/**
 * The Walsh-Hadamard rotation (Backend.hadamard) as its definition reads, for the reference
 * backend and the checks of the fast kernels: each chunk of n values multiplied by the n x n
 * matrix H[i][j] = (-1)^popcount(i & j) / sqrt(n), summed in f64. O(n^2) per chunk where the
 * kernels take O(n log n); n is at most a head's width, so that is cheap enough here.
 */

function popcount(x: number): number {
  let c = 0;
  for (; x !== 0; x &= x - 1) c++;
  return c;
}

/** Rotates every n consecutive values of `data` in place (data.length a multiple of n). */
export function hadamardChunks(data: Float32Array, n: number): void {
  const norm = 1 / Math.sqrt(n);
  const chunk = new Float64Array(n);
  for (let at = 0; at + n <= data.length; at += n) {
    for (let i = 0; i < n; i++) {
      let sum = 0;
      for (let j = 0; j < n; j++) {
        sum += popcount(i & j) & 1 ? -data[at + j] : data[at + j];
      }
      chunk[i] = sum * norm;
    }
    data.set(chunk, at);
  }
}
